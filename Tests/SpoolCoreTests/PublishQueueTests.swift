import Foundation
import SpoolCore
import XCTest

/// `PublishQueue`, rule by rule: one batch at a time, due retries join the next batch, a job
/// dropped when its item ends otherwise, a cancel takes back only a job no batch holds.
final class PublishQueueTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func testWaitingJobsGoAsOneBatchAndTheNextWaitsForItsReport() {
        var queue = PublishQueue<Int>()
        XCTAssertTrue(queue.isIdle)
        XCTAssertNil(queue.handOverAt)
        XCTAssertNil(queue.takeBatch(now: t0))
        queue.add(1)
        queue.add(2)
        XCTAssertEqual(queue.handOverAt, .distantPast)
        XCTAssertEqual(queue.takeBatch(now: t0), [1, 2])
        XCTAssertTrue(queue.inFlight)
        XCTAssertFalse(queue.isIdle)
        queue.add(3)
        XCTAssertNil(queue.handOverAt, "a batch is in flight and no retry waits")
        XCTAssertNil(queue.takeBatch(now: t0), "one batch at a time")
        queue.batchEnded()
        XCTAssertEqual(queue.takeBatch(now: t0), [3], "what finished meanwhile goes in the next batch")
        queue.batchEnded()
        XCTAssertTrue(queue.isIdle)
    }

    func testARetryJoinsTheBatchWhenDueAndNotBefore() {
        var queue = PublishQueue<Int>()
        queue.retry(7, at: t0.addingTimeInterval(5))
        XCTAssertEqual(queue.nextRetry, t0.addingTimeInterval(5))
        XCTAssertEqual(queue.handOverAt, t0.addingTimeInterval(5))
        XCTAssertNil(queue.takeBatch(now: t0.addingTimeInterval(4.9)))
        XCTAssertEqual(queue.takeBatch(now: t0.addingTimeInterval(5)), [7])
        XCTAssertNil(queue.nextRetry)
        // Due while a batch is in flight: it waits for the next batch, not for its time again.
        queue.retry(8, at: t0.addingTimeInterval(6))
        XCTAssertNil(queue.takeBatch(now: t0.addingTimeInterval(6)))
        XCTAssertNil(queue.nextRetry, "moved to the waiting jobs")
        queue.batchEnded()
        XCTAssertEqual(queue.takeBatch(now: t0.addingTimeInterval(6)), [8])
    }

    func testACancelTakesBackAJobThatWaitsButNotOneABatchHolds() {
        var queue = PublishQueue<Int>()
        queue.add(1)
        queue.retry(2, at: t0.addingTimeInterval(5))
        XCTAssertTrue(queue.withdraw { $0 == 2 }, "a job waiting for its retry")
        XCTAssertFalse(queue.holds { $0 == 2 })
        XCTAssertEqual(queue.takeBatch(now: t0), [1])
        XCTAssertFalse(queue.withdraw { $0 == 1 }, "the batch holds it: its result decides")
        XCTAssertFalse(queue.withdraw { $0 == 9 }, "unknown")
    }

    func testAnEndedItemsJobIsDroppedFromTheQueueAndTheRetries() {
        var queue = PublishQueue<Int>()
        queue.add(1)
        queue.add(2)
        queue.retry(1, at: t0)
        queue.drop { $0 == 1 }
        XCTAssertFalse(queue.holds { $0 == 1 })
        XCTAssertEqual(queue.takeBatch(now: t0), [2])
    }
}
