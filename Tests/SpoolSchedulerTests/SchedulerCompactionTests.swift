import Foundation
@testable import SpoolScheduler
import XCTest

/// Removed items leave stale heap entries; once they outnumber the live ones the heaps are
/// rebuilt, and the survivors still start in their order, once each.
final class SchedulerCompactionTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func testRemovingMostOfALargeWaitingQueueShrinksItsHeapsAndKeepsTheRest() {
        var s = Scheduler(configuration: .init(concurrency: 100, perHost: 100), timeZone: TimeZone(identifier: "UTC")!)
        let later = t0.addingTimeInterval(3600)
        for k in 1...20_000 { s.submit(ScheduledItem(key: k, hostKey: "a:80", earliestStart: later)) }
        for k in 1...5_000 { s.submit(ScheduledItem(key: 100_000 + k, hostKey: "b:80")) }
        // A request paused and resumed: each removed, then submitted again.
        for k in 1...20_000 { s.remove(k) }
        for k in 1...20_000 where k % 1000 == 0 { s.submit(ScheduledItem(key: k, hostKey: "a:80", earliestStart: later)) }
        for k in 1...5_000 where k > 10 { s.remove(100_000 + k) }
        XCTAssertEqual(s.queuedCount, 30)
        XCTAssertLessThanOrEqual(s.future.count + s.readyCount, 4096 + 30, "the stale entries went")
        var started: [ItemKey] = []
        for action in s.nextActions(now: t0) { if case .start(let k) = action { started.append(k) } }
        XCTAssertEqual(started, (1...10).map { 100_000 + $0 }, "the ready survivors, in arrival order")
        started = []
        for action in s.nextActions(now: later) { if case .start(let k) = action { started.append(k) } }
        XCTAssertEqual(started, (1...20).map { $0 * 1000 }, "the waiting survivors, at their time")
        XCTAssertEqual(s.queuedCount, 0)
    }
}
