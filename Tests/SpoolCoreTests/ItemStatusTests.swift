import Foundation
import SpoolCore
import SpoolScheduler
import XCTest

/// `ItemMachine.status`, a row per state: what `spoolfetch status` shows of an item, and the exit
/// it names when it is not moving.
final class ItemStatusTests: XCTestCase {
    typealias Machine = ItemMachine<Int, Int, Int>
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let policy = RetryPolicy(maxAttempts: 3, resourceTimeout: 3600, backoff: Backoff(base: 10, cap: 60))
    let utc = TimeZone(identifier: "UTC")!
    var context: ItemContext { ItemContext(now: t0, stopping: false, jitter: 1) }

    private func facts(start: Date? = nil, discretionary: Bool = false, window: DailyWindow? = nil,
                       hostWait: HostWait? = nil, space: SpaceShortage? = nil) -> ItemStatusFacts {
        ItemStatusFacts(now: t0, earliestStart: start, discretionary: discretionary, window: window, timeZone: utc,
                        hostKey: "h:80", hostWait: hostWait, space: space)
    }

    private func machine(_ events: [ItemEvent<Int, Int, Int>]) -> Machine {
        var m = Machine(firstQueued: t0)
        for e in [.submitted] + events { _ = m.handle(e, policy: policy, context: context) }
        return m
    }

    func testAQueuedItemIsPendingWaitingStartOrWaitingWindow() {
        let m = machine([])
        XCTAssertEqual(m.status(facts()), ItemStatus(state: "pending"))
        let later = t0.addingTimeInterval(600)
        XCTAssertEqual(m.status(facts(start: later)), ItemStatus(state: "waiting-start", startsAt: later))
        // 1_800_000_000 is 08:00 UTC: a 22:00-06:00 window is closed.
        let window = DailyWindow(parsing: "22:00-06:00")!
        let shown = m.status(facts(discretionary: true, window: window))
        XCTAssertEqual(shown.state, "waiting-window")
        XCTAssertEqual(shown.waitingFor, "the discretionary window 22:00-06:00, opens 2027-01-15T22:00:00Z")
        XCTAssertEqual(m.status(facts(discretionary: false, window: window)).state, "pending")
    }

    func testAPendingItemOfAHeldHostNamesTheHost() {
        let outage = HostOutage(hostKey: "h:80", since: t0, lastError: "connection refused", failures: 2,
                                nextProbe: t0.addingTimeInterval(8), probe: nil)
        XCTAssertEqual(machine([]).status(facts(hostWait: .unreachable(outage))).waitingFor,
                       "host h:80 unreachable since 2027-01-15T08:00:00Z; next probe 2027-01-15T08:00:08Z")
        XCTAssertEqual(machine([]).status(facts(hostWait: .backedOff(until: t0.addingTimeInterval(30)))).waitingFor,
                       "host h:80 backed off until 2027-01-15T08:00:30Z")
    }

    func testARetryingItemShowsWhenItsBackOffEnds() {
        let fault = TransferFault(code: "http-status", description: "HTTP 500", httpStatus: 500, isTransient: true)
        let m = machine([.slotGranted(space: .fits), .transferEnded(TransferEnd(fault: fault, hasPartial: false))])
        XCTAssertEqual(m.phase, .retrying)
        let shown = m.status(facts())
        XCTAssertEqual(shown.state, "retrying")
        XCTAssertEqual(shown.startsAt, t0.addingTimeInterval(policy.backoff.delay(afterAttempt: 1, jitter: 1, retryAfter: nil)))
        XCTAssertNil(shown.waitingFor)
    }

    func testAnItemWaitingForSpaceNamesTheFilesystem() {
        let m = machine([.slotGranted(space: .later(reason: "staging: not enough free space"))])
        XCTAssertEqual(m.status(facts()), ItemStatus(state: "waiting-space", waitingFor: "space on staging: not enough free space"))
        let short = SpaceShortage(folder: "/spool/staging", filesystem: "tmpfs at /spool", free: 10, minFree: 0, needed: 20)
        XCTAssertEqual(m.status(facts(space: short)).waitingFor,
                       "space on /spool/staging (tmpfs at /spool): 10 bytes free, 0 kept free, 20 needed")
    }

    func testAPausedItemNamesResume() {
        let m = machine([.operatorCommand(.pause)])
        XCTAssertEqual(m.status(facts()), ItemStatus(state: "paused", waitingFor: ItemStatus.pausedWaitsFor))
    }

    func testRunningPublishingAndEndedItemsWaitForNothing() {
        XCTAssertEqual(machine([.slotGranted(space: .fits)]).status(facts()), ItemStatus(state: "running"))
        let complete = TransferEnd(fault: nil, sha256: "ab", hasPartial: false)
        XCTAssertEqual(machine([.slotGranted(space: .fits), .transferEnded(complete)]).status(facts()), ItemStatus(state: "publishing"))
        XCTAssertEqual(machine([.slotGranted(space: .fits), .transferEnded(complete), .publishSucceeded(file: "f", marker: "m")])
            .status(facts()), ItemStatus(state: "done"))
        XCTAssertEqual(machine([.operatorCommand(.cancel)]).status(facts()), ItemStatus(state: "failed"))
    }
}
