import Foundation
import SpoolScheduler
import XCTest

final class SchedulerTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let utc = TimeZone(identifier: "UTC")!

    private func starts(_ actions: [SchedulerAction]) -> [ItemKey] {
        actions.compactMap { if case .start(let k) = $0 { return k } else { return nil } }
    }
    private func pauses(_ actions: [SchedulerAction]) -> [ItemKey] {
        actions.compactMap { if case .pause(let k) = $0 { return k } else { return nil } }
    }

    func testStartsUpToConcurrencyInArrivalOrder() {
        var s = Scheduler(configuration: .init(concurrency: 2, perHost: 10), timeZone: utc)
        for k in 1...4 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1, 2])
        XCTAssertEqual(s.nextActions(now: t0), [])
        s.finished(1)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [3])
        XCTAssertEqual(s.runningCount, 2)
    }

    func testAParkedItemHoldsNoSlotIsNeverPreemptedAndQueuesForOneWhenUnparked() {
        var s = Scheduler(configuration: .init(concurrency: 1, perHost: 10), timeZone: utc)
        for k in 1...2 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1])
        s.park(1)
        XCTAssertTrue(s.isParked(1))
        XCTAssertTrue(s.holds(1), "still the scheduler's")
        XCTAssertEqual(s.connectionsInUse, 0)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [2], "its slot went to the next item")
        s.unpark(1)
        XCTAssertFalse(s.isParked(1))
        XCTAssertEqual(s.nextActions(now: t0), [], "it queues: the one slot is taken")
        s.finished(2)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1])
        s.park(1)
        s.finished(1)
        XCTAssertFalse(s.holds(1), "a parked item that ends is forgotten")
        XCTAssertTrue(s.isIdle)
    }

    /// A parked waiter that asked for a slot again and ended (cancelled) before it got one is
    /// forgotten, not started later into a slot nobody frees (the simulation's store seed 1).
    func testAnUnparkedItemThatEndsBeforeItsStartIsNeverStarted() {
        var s = Scheduler(configuration: .init(concurrency: 1, perHost: 1), timeZone: utc)
        for k in 1...2 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1])
        s.park(1)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [2])
        s.unpark(1)
        s.finished(1)
        XCTAssertFalse(s.holds(1), "an item that ended while queued is forgotten")
        s.finished(2)
        XCTAssertEqual(s.nextActions(now: t0), [], "the ended item is not started")
        XCTAssertTrue(s.isIdle)
        s.submit(ScheduledItem(key: 3, hostKey: "a:80"))
        XCTAssertEqual(starts(s.nextActions(now: t0)), [3], "its host's one slot is free")
    }

    func testMaxStartsBoundsTheStartsOfOneCallAndTheRestComeLater() {
        var s = Scheduler(configuration: .init(concurrency: 10, perHost: 10), timeZone: utc)
        for k in 1...5 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        XCTAssertEqual(starts(s.nextActions(now: t0, maxStarts: 2)), [1, 2])
        XCTAssertEqual(s.nextActions(now: t0, maxStarts: 0), [], "no start, and nothing else either")
        XCTAssertEqual(s.nextWakeup(now: t0), nil, "no timer: the engine is woken by the event that frees room")
        XCTAssertEqual(starts(s.nextActions(now: t0)), [3, 4, 5])
    }

    func testNoPreemptionWhereNoStartIsAllowed() {
        var s = Scheduler(configuration: .init(concurrency: 1, perHost: 10), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", priority: .low))
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1])
        s.submit(ScheduledItem(key: 2, hostKey: "a:80", priority: .high))
        XCTAssertEqual(s.nextActions(now: t0, maxStarts: 0), [], "the low one keeps running")
        XCTAssertEqual(pauses(s.nextActions(now: t0)), [1])
    }

    func testPerHostLimitLetsOtherHostsThrough() {
        var s = Scheduler(configuration: .init(concurrency: 10, perHost: 1), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        s.submit(ScheduledItem(key: 2, hostKey: "a:80"))
        s.submit(ScheduledItem(key: 3, hostKey: "b:80"))
        XCTAssertEqual(Set(starts(s.nextActions(now: t0))), [1, 3])
        s.finished(1)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [2])
    }

    func testEarliestStartWaitsInTimerHeapAndWakesExactlyThen() {
        var s = Scheduler(configuration: .init(), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", earliestStart: t0.addingTimeInterval(3600)))
        XCTAssertEqual(s.nextActions(now: t0), [])
        XCTAssertEqual(s.nextWakeup(now: t0), t0.addingTimeInterval(3600))
        XCTAssertEqual(s.nextActions(now: t0.addingTimeInterval(3599.9)), [])
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(3600))), [1])
        XCTAssertNil(s.nextWakeup(now: t0.addingTimeInterval(3600)))
    }

    func testIdleSchedulerNeedsNoWakeup() {
        var s = Scheduler(configuration: .init(), timeZone: utc)
        XCTAssertNil(s.nextWakeup(now: t0))
        XCTAssertTrue(s.isIdle)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        _ = s.nextActions(now: t0)
        XCTAssertNil(s.nextWakeup(now: t0), "a running item needs no scheduler timer")
    }

    func testHighPriorityFirstThenEarliestStartThenArrival() {
        var s = Scheduler(configuration: .init(concurrency: 1, perHost: 1, highPreempts: false), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", priority: .low))
        s.submit(ScheduledItem(key: 2, hostKey: "a:80", priority: .normal, earliestStart: t0.addingTimeInterval(-10)))
        s.submit(ScheduledItem(key: 3, hostKey: "a:80", priority: .normal, earliestStart: t0.addingTimeInterval(-20)))
        s.submit(ScheduledItem(key: 4, hostKey: "a:80", priority: .high))
        var order: [ItemKey] = []
        for _ in 0..<4 {
            let started = starts(s.nextActions(now: t0))
            XCTAssertEqual(started.count, 1)
            order += started
            s.finished(started[0])
        }
        XCTAssertEqual(order, [4, 3, 2, 1])
    }

    func testHighItemPausesRunningLowWhenNoSlotIsFree() {
        var s = Scheduler(configuration: .init(concurrency: 1, perHost: 1), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", priority: .low))
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1])
        s.submit(ScheduledItem(key: 2, hostKey: "a:80", priority: .high))
        let actions = s.nextActions(now: t0)
        XCTAssertEqual(pauses(actions), [1])
        XCTAssertEqual(starts(actions), [2])
        s.finished(2)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1], "the paused item runs again afterwards")
    }

    func testNormalItemDoesNotPreempt() {
        var s = Scheduler(configuration: .init(concurrency: 1, perHost: 1), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", priority: .low))
        _ = s.nextActions(now: t0)
        s.submit(ScheduledItem(key: 2, hostKey: "a:80", priority: .normal))
        XCTAssertEqual(s.nextActions(now: t0), [])
    }

    func testDiscretionaryWithoutWindowRunsOnlyWhenNothingElseWaits() {
        var s = Scheduler(configuration: .init(concurrency: 1, perHost: 5), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", discretionary: true))
        s.submit(ScheduledItem(key: 2, hostKey: "a:80"))
        s.submit(ScheduledItem(key: 3, hostKey: "a:80"))
        XCTAssertEqual(starts(s.nextActions(now: t0)), [2])
        s.finished(2)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [3])
        s.finished(3)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1])
    }

    func testDiscretionaryRunsOnlyInsideWindowAndPausesWhenItCloses() {
        let window = DailyWindow(parsing: "22:00-06:00")!
        var s = Scheduler(configuration: .init(window: window), timeZone: utc)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = utc
        let noon = calendar.date(from: DateComponents(year: 2027, month: 1, day: 10, hour: 12))!
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", discretionary: true))
        s.submit(ScheduledItem(key: 2, hostKey: "a:80"))
        XCTAssertEqual(starts(s.nextActions(now: noon)), [2], "normal items run, discretionary waits")
        let opening = calendar.date(from: DateComponents(year: 2027, month: 1, day: 10, hour: 22))!
        XCTAssertEqual(s.nextWakeup(now: noon), opening)
        XCTAssertEqual(starts(s.nextActions(now: opening)), [1])
        let closing = calendar.date(from: DateComponents(year: 2027, month: 1, day: 11, hour: 6))!
        XCTAssertEqual(s.nextWakeup(now: opening), closing)
        let actions = s.nextActions(now: closing)
        XCTAssertEqual(pauses(actions), [1])
        XCTAssertEqual(starts(actions), [])
        XCTAssertEqual(s.nextWakeup(now: closing), calendar.date(from: DateComponents(year: 2027, month: 1, day: 11, hour: 22)))
    }

    func testWindowAcrossMidnightContainsBothSides() {
        let w = DailyWindow(parsing: "22:30-01:15")!
        func at(_ h: Int, _ m: Int) -> Date {
            Date(timeIntervalSince1970: Double(1_800_000_000 - 1_800_000_000 % 86_400 + h * 3600 + m * 60))
        }
        XCTAssertTrue(w.contains(at(23, 0), in: utc))
        XCTAssertTrue(w.contains(at(0, 30), in: utc))
        XCTAssertTrue(w.contains(at(22, 30), in: utc))
        XCTAssertFalse(w.contains(at(1, 15), in: utc))
        XCTAssertFalse(w.contains(at(12, 0), in: utc))
        XCTAssertFalse(w.contains(at(22, 29), in: utc))
    }

    func testWindowParsingRejectsMalformed() {
        XCTAssertNil(DailyWindow(parsing: "22:00"))
        XCTAssertNil(DailyWindow(parsing: "25:00-01:00"))
        XCTAssertNil(DailyWindow(parsing: "10:00-10:00"))
        XCTAssertNil(DailyWindow(parsing: "1:00-2:00"))
        XCTAssertEqual(DailyWindow(parsing: "09:05-17:00")?.description, "09:05-17:00")
    }

    func testWindowUsesTheGivenTimeZone() {
        let w = DailyWindow(parsing: "09:00-10:00")!
        let tz = TimeZone(secondsFromGMT: 2 * 3600)!
        let sevenThirtyUTC = Date(timeIntervalSince1970: Double(1_800_000_000 - 1_800_000_000 % 86_400) + 7.5 * 3600)
        XCTAssertTrue(w.contains(sevenThirtyUTC, in: tz))
        XCTAssertFalse(w.contains(sevenThirtyUTC, in: utc))
    }

    func testRetryWaitsForBackoffAndKeepsOrder() {
        var s = Scheduler(configuration: .init(concurrency: 1), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        _ = s.nextActions(now: t0)
        s.retry(1, notBefore: t0.addingTimeInterval(2))
        XCTAssertEqual(s.runningCount, 0)
        XCTAssertEqual(s.nextActions(now: t0.addingTimeInterval(1)), [])
        XCTAssertEqual(s.nextWakeup(now: t0), t0.addingTimeInterval(2))
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(2))), [1])
    }

    func testHostHoldBlocksOnlyThatHost() {
        var s = Scheduler(configuration: .init(), timeZone: utc)
        s.holdHost("a:80", until: t0.addingTimeInterval(30))
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        s.submit(ScheduledItem(key: 2, hostKey: "b:80"))
        XCTAssertEqual(starts(s.nextActions(now: t0)), [2])
        XCTAssertEqual(s.nextWakeup(now: t0), t0.addingTimeInterval(30))
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(30))), [1])
    }

    func testRemovedQueuedItemNeverStarts() {
        var s = Scheduler(configuration: .init(), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", earliestStart: t0.addingTimeInterval(5)))
        s.submit(ScheduledItem(key: 2, hostKey: "a:80"))
        s.remove(1)
        s.remove(2)
        XCTAssertEqual(s.nextActions(now: t0.addingTimeInterval(10)), [])
        XCTAssertTrue(s.isIdle)
    }

    func testBackoffDoublesIsCappedJitteredAndHonoursRetryAfter() {
        let b = Backoff(base: 1, cap: 10)
        XCTAssertEqual(b.delay(afterAttempt: 1, jitter: 1), 1)
        XCTAssertEqual(b.delay(afterAttempt: 2, jitter: 1), 2)
        XCTAssertEqual(b.delay(afterAttempt: 3, jitter: 1), 4)
        XCTAssertEqual(b.delay(afterAttempt: 10, jitter: 1), 10)
        XCTAssertEqual(b.delay(afterAttempt: 3, jitter: 0), 2)
        XCTAssertEqual(b.delay(afterAttempt: 1, jitter: 1, retryAfter: 7), 7)
        XCTAssertEqual(b.delay(afterAttempt: 4, jitter: 1, retryAfter: 3), 8)
    }

    func testHundredThousandQueuedItemsScheduleQuickly() {
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6), timeZone: utc)
        for k in 0..<100_000 {
            s.submit(ScheduledItem(key: k, hostKey: "h\(k % 50):80", earliestStart: t0.addingTimeInterval(Double(k % 100))))
        }
        XCTAssertEqual(s.queuedCount, 100_000)
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(1000))).count, 16)
    }
}

final class SchedulerRemovalTests: XCTestCase {
    func testRemovedThenResubmittedItemStartsExactlyOnce() {
        var s = Scheduler(configuration: .init(concurrency: 5), timeZone: TimeZone(identifier: "UTC")!)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80", earliestStart: now.addingTimeInterval(10)))
        s.remove(1)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        XCTAssertEqual(s.queuedCount, 1)
        XCTAssertEqual(s.nextActions(now: now.addingTimeInterval(20)), [.start(1)])
        XCTAssertEqual(s.nextActions(now: now.addingTimeInterval(20)), [], "the stale timer entry does not start it again")
        XCTAssertEqual(s.queuedCount, 0)
    }

    func testReleasedHoldLetsTheHostStartAtOnce() {
        var s = Scheduler(configuration: .init(), timeZone: TimeZone(identifier: "UTC")!)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        s.holdHost("a:80", until: now.addingTimeInterval(3600))
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        XCTAssertEqual(s.nextActions(now: now), [])
        s.releaseHold("a:80")
        XCTAssertEqual(s.nextActions(now: now), [.start(1)])
    }
}
