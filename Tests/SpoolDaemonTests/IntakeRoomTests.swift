import Foundation
import Logging
@testable import SpoolDaemon
import SpoolStore
import XCTest

/// The intake room built on its own (issue 60, point 6): a real spool in a temporary folder, the
/// I/O queue held by the test (`HeldIO`), no engine. What it decides: a listed name is handed to
/// be claimed; a claimed file that parses is taken into the item table whole and handed on; one
/// that does not is left out of the table and filed in `rejected/` with its line and rule — on
/// the I/O queue, not on the engine thread.
final class IntakeRoomTests: XCTestCase {
    private var spool: TemporarySpool!
    private var io: HeldIO!
    private var table: ItemTable!
    private var intake: Intake!

    override func setUpWithError() throws {
        spool = try TemporarySpool("intake")
        io = HeldIO()
        table = ItemTable()
        intake = Intake(store: spool.store, io: io, logger: Logger(label: "intake-test"),
                        ledger: JournalLedger(staging: spool.layout.staging), table: table,
                        maxItems: 100, maxRequestBytes: 1 << 20)
    }

    override func tearDown() {
        intake = nil
        spool.remove()
    }

    /// Takes in the backlog as the engine's turn does, returning the names handed to be claimed.
    private func takeIn() -> [String] {
        var claimed: [String] = []
        intake.takeIn(stopping: false, claim: { claimed.append($0) }, accept: { _ in XCTFail("nothing was adopted") },
                      groupPending: { _ in XCTFail("no group was pending") })
        return claimed
    }

    func testAListedRequestIsClaimedAcceptedWholeAndHandedOn() throws {
        spool.drop("fetch-two", "https://example.org/data/a.csv\nhttps://mirror.example.net/data/b.csv\n")
        XCTAssertFalse(intake.initialScanDone)
        intake.listed(["fetch-two"], initial: true)
        XCTAssertTrue(intake.initialScanDone, "a drain may now know that nothing is left")
        XCTAssertFalse(intake.backlogIsEmpty)
        XCTAssertEqual(takeIn(), ["fetch-two"], "the listed name is handed on to be claimed")
        XCTAssertTrue(intake.backlogIsEmpty)

        guard case .claimed(let claim) = intake.claim("fetch-two") else { return XCTFail("not claimed") }
        XCTAssertFalse(spool.names(in: "incoming").contains("fetch-two"), "claimed: renamed out of incoming/")
        guard case .accepted(let accepted) = intake.accept(claim, adopted: false, now: Date()) else {
            return XCTFail("a valid request is accepted")
        }
        XCTAssertEqual(accepted.request.name, "fetch-two")
        XCTAssertEqual(accepted.request.items.map(\.index), [0, 1], "every item, in file order")
        XCTAssertNil(accepted.recovered, "a fresh request's items are all queued")
        XCTAssertTrue(table.request(named: "fetch-two") === accepted.request, "taken into the item table")
        XCTAssertEqual(accepted.request.groupEnd.openItems, 2)
        XCTAssertEqual(io.waiting, 0, "nothing to file")
    }

    func testABadRequestIsLeftOutOfTheTableAndFiledInRejectedWithItsLine() throws {
        spool.drop("bad", "https://example.org/a.csv\npriority: whenever\n")
        guard case .claimed(let claim) = intake.claim("bad") else { return XCTFail("not claimed") }
        guard case .rejected = intake.accept(claim, adopted: false, now: Date()) else {
            return XCTFail("a request with a bad line is rejected")
        }
        XCTAssertNil(table.request(named: "bad"), "nothing of it is in the item table")
        XCTAssertFalse(spool.names(in: "rejected").contains("bad"), "filed on the I/O queue, not at once")
        XCTAssertEqual(io.waiting, 1, "one filing job")

        let answers = io.runAll()
        guard answers.count == 1, case .rejected(request: "bad", error: nil) = answers[0] else {
            return XCTFail("filed: \(answers)")
        }
        XCTAssertTrue(spool.names(in: "rejected").contains("bad"))
        let record = try spool.json("\(spool.root)/rejected/bad.error")
        XCTAssertEqual(record["line"] as? Int, 2, "the error names the offending line: \(record)")
        XCTAssertEqual(record["request"] as? String, "bad")
    }

    func testASymlinkInIncomingIsRefusedWithoutBeingOpened() throws {
        let target = spool.root + "/secret"
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data("https://example.org/x\n".utf8)))
        try FileManager.default.createSymbolicLink(atPath: spool.root + "/incoming/link", withDestinationPath: target)
        guard case .rejected = intake.claim("link") else { return XCTFail("a symlink is not claimed") }
        XCTAssertEqual(io.waiting, 1)
        _ = io.runAll()
        XCTAssertTrue(spool.names(in: "rejected").contains("link"))
        XCTAssertFalse(spool.names(in: "incoming").contains("link"))
        XCTAssertTrue(table.isEmpty)
    }

    func testANameThatIsNotACandidateIsIgnored() {
        guard case .none = intake.claim(".hidden.tmp") else { return XCTFail("a temp name is not a request") }
        XCTAssertEqual(io.waiting, 0)
    }
}
