import Foundation
import SpoolScheduler
import XCTest

/// Outages with an injected clock: a held host starts only probes, on a capped back-off, until it
/// is reachable again; other hosts are unaffected; a network change makes the probe due now.
final class HostOutageTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let utc = TimeZone(identifier: "UTC")!

    private func starts(_ actions: [SchedulerAction]) -> [ItemKey] {
        actions.compactMap { if case .start(let k) = $0 { return k } else { return nil } }
    }

    /// 200 items of host a; the first start fails to reach it.
    private func heldHost(items: Int = 200, probeBackoff: Backoff = Backoff(base: 1, cap: 300)) -> Scheduler {
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6, probeBackoff: probeBackoff), timeZone: utc)
        for k in 0..<items { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        let first = starts(s.nextActions(now: t0))
        XCTAssertEqual(first.count, 6, "before the outage is known, the per-host limit applies")
        for k in first { s.hostUnreachable("a:80", failedItem: k, now: t0, error: "connection refused", jitter: 1) }
        return s
    }

    func testHeldHostStartsOnlyOneProbeUntilReachable() {
        var s = heldHost()
        XCTAssertEqual(s.runningCount, 0)
        XCTAssertEqual(s.queuedCount, 200, "the failed items went back to the queue")
        XCTAssertEqual(s.hostOutages.map(\.failures), [1], "items already running do not push the back-off")
        XCTAssertEqual(s.nextActions(now: t0), [], "no probe before the back-off step")
        XCTAssertEqual(s.nextWakeup(now: t0), t0.addingTimeInterval(1))

        let probe = starts(s.nextActions(now: t0.addingTimeInterval(1)))
        XCTAssertEqual(probe, [0], "one probe, the first item in order")
        XCTAssertTrue(s.isProbe(0))
        XCTAssertEqual(s.hostOutages.first?.probe, 0)
        XCTAssertEqual(s.nextActions(now: t0.addingTimeInterval(100)), [], "one probe at a time")
        XCTAssertNil(s.nextWakeup(now: t0.addingTimeInterval(100)), "no timer while the probe runs")

        s.hostReachable("a:80")
        XCTAssertFalse(s.isProbe(0))
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(100))).count, 5,
                       "reachable: the host's items start at once, up to the per-host limit")
        XCTAssertTrue(s.hostOutages.isEmpty)
    }

    func testProbeFailuresBackOffDoublingToTheCap() {
        var s = heldHost(probeBackoff: Backoff(base: 1, cap: 8))
        var now = t0
        var gaps: [Double] = []
        for _ in 0..<6 {
            let due = s.nextWakeup(now: now)!
            gaps.append(due.timeIntervalSince(now))
            now = due
            let probe = starts(s.nextActions(now: now))
            XCTAssertEqual(probe.count, 1)
            s.hostUnreachable("a:80", failedItem: probe[0], now: now, error: "timed out", jitter: 1)
        }
        XCTAssertEqual(gaps, [1, 2, 4, 8, 8, 8])
        XCTAssertEqual(s.hostOutages.first?.since, t0)
        XCTAssertEqual(s.hostOutages.first?.lastError, "timed out")
        XCTAssertEqual(s.hostOutages.first?.failures, 7)
    }

    func testProbeStartsOverAnHourAreBoundedByTheSchedule() {
        // Worst case for the count: the shortest jitter (half of each step). Steps 0.5, 1, 2, …,
        // 128 (9 probes, 255.5 s), then 150 s each: (3600 - 255.5) / 150 → 22 more; 31 in all.
        var s = heldHost()
        var probes = 0
        var now = t0
        let end = t0.addingTimeInterval(3600)
        // The first failure was reported with jitter 1; fail every probe with jitter 0.
        while let due = s.nextWakeup(now: now), due <= end {
            now = due
            let started = starts(s.nextActions(now: now))
            XCTAssertEqual(started.count, 1, "only a probe ever starts for the held host")
            probes += started.count
            s.hostUnreachable("a:80", failedItem: started[0], now: now, error: "refused", jitter: 0)
        }
        XCTAssertEqual(s.queuedCount, 200)
        XCTAssertGreaterThanOrEqual(probes, 25)
        XCTAssertLessThanOrEqual(probes, 32, "\(probes) probes in an hour")
    }

    func testOtherHostsAreUnaffected() {
        var s = heldHost()
        for k in 1000..<1010 { s.submit(ScheduledItem(key: k, hostKey: "b:80")) }
        XCTAssertEqual(starts(s.nextActions(now: t0)), Array(1000..<1006))
        s.finished(1000)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1006])
    }

    func testProbeNowMakesTheProbeDueAtOnce() {
        var s = heldHost(probeBackoff: Backoff(base: 60, cap: 300))
        let later = t0.addingTimeInterval(5)
        XCTAssertEqual(s.nextActions(now: later), [])
        XCTAssertEqual(s.nextWakeup(now: later), t0.addingTimeInterval(60))
        XCTAssertEqual(s.probeNow(later), ["a:80"])
        XCTAssertEqual(starts(s.nextActions(now: later)), [0])
        XCTAssertEqual(s.probeNow(later), [], "a running probe is not doubled")
    }

    func testCancelledProbeLetsAnotherItemProbe() {
        var s = heldHost()
        let probe = starts(s.nextActions(now: t0.addingTimeInterval(1)))
        XCTAssertEqual(probe, [0])
        s.remove(0)
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(1))), [1])
        XCTAssertTrue(s.isProbe(1))
    }

    func testItemsThatFailOneAfterAnotherDoNotPushTheProbeFurther() {
        var s = Scheduler(configuration: .init(concurrency: 4, perHost: 4), timeZone: utc)
        for k in 0..<4 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        XCTAssertEqual(starts(s.nextActions(now: t0)).count, 4)
        s.hostUnreachable("a:80", failedItem: 0, now: t0, error: "e", jitter: 1)
        s.hostUnreachable("a:80", failedItem: 1, now: t0.addingTimeInterval(0.5), error: "e", jitter: 1)
        s.hostUnreachable("a:80", failedItem: 2, now: t0.addingTimeInterval(0.9), error: "e", jitter: 1)
        XCTAssertEqual(s.hostOutages.first?.nextProbe, t0.addingTimeInterval(1))
        XCTAssertEqual(s.hostOutages.first?.failures, 1)
        XCTAssertEqual(s.runningCount, 1, "item 3 still runs; it may reach the host yet")
    }

    func testAnOutageRecordGoesWithTheLastItemOfItsHost() {
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6), timeZone: utc)
        for k in 0..<3 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        for k in starts(s.nextActions(now: t0)) { s.hostUnreachable("a:80", failedItem: k, now: t0, error: "refused", jitter: 1) }
        XCTAssertEqual(s.hostOutages.count, 1)
        s.holdHost("a:80", until: t0.addingTimeInterval(600))
        s.remove(0)
        s.remove(1)
        XCTAssertEqual(s.hostOutages.count, 1, "an item still needs the host")
        XCTAssertEqual(s.itemCount(ofHost: "a:80"), 1)
        s.remove(2)
        XCTAssertEqual(s.hostOutages, [], "no host is shown unreachable for work that no longer exists")
        XCTAssertEqual(s.itemCount(ofHost: "a:80"), 0)
        XCTAssertNil(s.nextWakeup(now: t0), "no probe, no hold timer")
        // A new item of the host starts at once: no stale hold or outage.
        s.submit(ScheduledItem(key: 9, hostKey: "a:80"))
        XCTAssertEqual(starts(s.nextActions(now: t0)), [9])
    }

    func testAFinishedItemReleasesItsHostButARunningOneKeepsIt() {
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "b:80"))
        XCTAssertEqual(starts(s.nextActions(now: t0)), [1])
        XCTAssertTrue(s.holds(1))
        s.retry(1, notBefore: t0.addingTimeInterval(5))
        XCTAssertTrue(s.holds(1), "waiting for its retry it still needs the host")
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(5))), [1])
        s.finished(1)
        XCTAssertFalse(s.holds(1))
        XCTAssertEqual(s.itemCount(ofHost: "b:80"), 0)
    }
}
