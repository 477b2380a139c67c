import Foundation
import Logging
@testable import SpoolDaemon
import XCTest

/// When the status report is due (`StatusReporter.nextWrite`), row by row, on a real spool's
/// `status/` folder: at once at start-up, a change after a quiet spell `settle` later, at most
/// once a second while something changes or runs, nothing while idle.
final class StatusTimingTests: XCTestCase {
    var spool: TemporarySpool!
    var status: StatusReporter!
    let table = ItemTable()
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    override func setUpWithError() throws {
        spool = try TemporarySpool("status")
        status = StatusReporter(directory: spool.layout.status, spoolRoot: spool.root, logger: Logger(label: "status-test"))
    }

    override func tearDown() { spool.remove() }

    private func write(at now: Date) {
        status.write(now: now, table: table, window: nil, task: { _ in preconditionFailure("the table holds no items") }, running: 0,
                     summary: RunSummary(), hooksRunning: 0, hooksWaiting: 0, outages: [], watcher: nil)
    }

    func testTheFirstReportIsDueAtOnce() {
        XCTAssertEqual(status.nextWrite(anyRunning: false, now: t0), .distantPast)
        write(at: t0)
        XCTAssertTrue(spool.names(in: "status").contains(status.fileName))
        XCTAssertNil(status.nextWrite(anyRunning: false, now: t0), "nothing changed, nothing runs: no report (idle means asleep)")
    }

    func testAChangeAfterAQuietSpellWaitsTheSettleThenTheDueTimeHolds() {
        write(at: t0)
        let change = t0.addingTimeInterval(30)
        status.dirty = true
        XCTAssertEqual(status.nextWrite(anyRunning: false, now: change), change.addingTimeInterval(StatusReporter.settle))
        // Asked again later in the burst (another turn): the same due time, not pushed back.
        XCTAssertEqual(status.nextWrite(anyRunning: true, now: change.addingTimeInterval(0.3)),
                       change.addingTimeInterval(StatusReporter.settle))
        write(at: change.addingTimeInterval(StatusReporter.settle))
        XCTAssertNil(status.nextWrite(anyRunning: false, now: change.addingTimeInterval(StatusReporter.settle)))
    }

    func testWithinASecondOfTheLastReportTheNextComesASecondAfterIt() {
        write(at: t0)
        status.dirty = true
        XCTAssertEqual(status.nextWrite(anyRunning: false, now: t0.addingTimeInterval(0.2)), t0.addingTimeInterval(1))
        write(at: t0.addingTimeInterval(1))
        // A transfer running: once a second, without a settle between reports.
        XCTAssertEqual(status.nextWrite(anyRunning: true, now: t0.addingTimeInterval(1)), t0.addingTimeInterval(2))
    }
}
