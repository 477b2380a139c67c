import Foundation
@testable import SpoolScheduler
import XCTest

/// An HTTP/1.1 host's adaptive connection limit (`HostConnectionLimit`), one test per rule.
final class HostConnectionLimitTests: XCTestCase {
    /// One window of `completions` requests of `latency` seconds each, over `seconds`, from `start`.
    private func window(_ l: inout HostConnectionLimit, start: Double, seconds: Double, completions: Int,
                        latency: Double, waiting: Bool = true, backlog: Int = 0) -> Bool {
        var changed = false
        for i in 1...completions {
            let now = start + seconds * Double(i) / Double(completions)
            changed = l.completed(now: now, seconds: latency, waiting: waiting, backlog: backlog) || changed
        }
        return changed
    }

    func testAHostWhoseItemsWaitGainsConnectionsWhileThroughputRisesUpToTheCeiling() {
        var l = HostConnectionLimit(floor: 6, ceiling: 16, now: 0)
        XCTAssertTrue(window(&l, start: 0, seconds: 0.2, completions: 12, latency: 0.05))
        XCTAssertEqual(l.limit, 9, "half as many more")
        XCTAssertEqual(l.reason, "throughput rising")
        XCTAssertFalse(window(&l, start: 0.2, seconds: 0.2, completions: 18, latency: 0.05), "the window after a step settles")
        XCTAssertTrue(window(&l, start: 0.4, seconds: 0.2, completions: 18, latency: 0.05), "18 vs 12 a window: a gain")
        XCTAssertEqual(l.limit, 13)
        _ = window(&l, start: 0.6, seconds: 0.2, completions: 26, latency: 0.05)
        _ = window(&l, start: 0.8, seconds: 0.2, completions: 26, latency: 0.05)
        XCTAssertEqual(l.limit, 16, "never past the ceiling")
    }

    func testNoWaitingItemsNoGrowth() {
        var l = HostConnectionLimit(floor: 6, ceiling: 16, now: 0)
        XCTAssertFalse(window(&l, start: 0, seconds: 0.2, completions: 12, latency: 0.05, waiting: false))
        XCTAssertEqual(l.limit, 6)
    }

    func testAStepThatAddsTooLittleIsTakenBackAndNotTriedAgainForAWhile() {
        var l = HostConnectionLimit(floor: 6, ceiling: 16, now: 0)
        _ = window(&l, start: 0, seconds: 0.2, completions: 12, latency: 0.05)
        XCTAssertEqual(l.limit, 9)
        _ = window(&l, start: 0.2, seconds: 0.2, completions: 18, latency: 0.05)
        XCTAssertTrue(window(&l, start: 0.4, seconds: 0.3, completions: 18, latency: 0.05),
                      "the same throughput with three more connections: the server is the bottleneck")
        XCTAssertEqual(l.limit, 6)
        XCTAssertEqual(l.reason, "no more throughput")
        _ = window(&l, start: 0.7, seconds: 0.2, completions: 12, latency: 0.05)
        XCTAssertEqual(l.limit, 6, "no step up for a while")
        _ = l.completed(now: 1 + HostConnectionLimit.holdAfterNoGain, seconds: 0.05, waiting: true)   // a long window closes
        _ = window(&l, start: 1 + HostConnectionLimit.holdAfterNoGain, seconds: 0.2, completions: 12, latency: 0.05)
        XCTAssertEqual(l.limit, 9, "then it tries again")
    }

    func testRisingResponseTimesGiveAConnectionBack() {
        var l = HostConnectionLimit(floor: 6, ceiling: 16, now: 0)
        _ = window(&l, start: 0, seconds: 0.2, completions: 12, latency: 0.05)
        _ = window(&l, start: 0.2, seconds: 0.2, completions: 18, latency: 0.05)
        XCTAssertEqual(l.limit, 9)
        XCTAssertTrue(window(&l, start: 0.4, seconds: 0.4, completions: 20, latency: 0.15))
        XCTAssertEqual(l.limit, 8)
        XCTAssertEqual(l.reason, "response times rising")
    }

    func testStrainHalvesTheLimitNotBelowPerHost() {
        var l = HostConnectionLimit(floor: 6, ceiling: 32, now: 0)
        for w in 0..<6 { _ = window(&l, start: Double(w) * 0.2, seconds: 0.2, completions: 2 * l.limit, latency: 0.05) }
        XCTAssertEqual(l.limit, 19, "6, 9, 13, 19 with a settling window after each step")
        XCTAssertTrue(l.strained(now: 2, why: "refused requests (429/503)"))
        XCTAssertEqual(l.limit, 9)
        XCTAssertTrue(l.strained(now: 2, why: "connections refused or reset"))
        XCTAssertEqual(l.limit, 6)
        XCTAssertFalse(l.strained(now: 2, why: "again"), "never below --per-host")
        _ = window(&l, start: 3, seconds: 0.2, completions: 12, latency: 0.05)
        XCTAssertEqual(l.limit, 6, "no step up soon after strain")
    }

    /// In the scheduler: an HTTP/1.1 host's starts follow its limit; an HTTP/2 host keeps
    /// `perHost` (its one connection with many streams), and a 429 halves the HTTP/1.1 limit.
    func testTheSchedulerHoldsAnHTTP11HostToItsLimitAndAnHTTP2HostToItsStreams() {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        var s = Scheduler(configuration: .init(concurrency: 32, perHost: 6, perHostMax: 16), timeZone: TimeZone(identifier: "UTC")!)
        // 60 items: fewer than `backlogRounds` × 16 wait after the first window, so the step is the usual one.
        for k in 0..<60 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        func starts(_ now: Date) -> [ItemKey] {
            s.nextActions(now: now).compactMap { if case .start(let k) = $0 { return k } else { return nil } }
        }
        var running = starts(t0)
        XCTAssertEqual(running.count, 6)
        // Twelve requests end 100 ms after they start, over 0.2 s: the host gains three connections.
        var now = t0
        for _ in 0..<2 {
            now = now.addingTimeInterval(0.1)
            for k in running { s.finished(k) }
            running = starts(now)
        }
        XCTAssertEqual(running.count, 9, "the window showed throughput: three more connections")
        XCTAssertEqual(s.hostConnectionLimits["a:80"]?.limit, 9)
        XCTAssertEqual(s.takeHostLimitChanges().map(\.limit), [9])
        s.hostRefused("a:80", now: now, retryAfter: nil)
        XCTAssertEqual(s.hostConnectionLimits["a:80"]?.limit, 6, "a 429 halves it, not below --per-host")
        s.hostSpoke("a:80", multiplexes: true)
        for k in running { s.finished(k) }
        XCTAssertEqual(starts(now.addingTimeInterval(10)).count, 1, "paced by the 429: one start per interval")
    }

    func testABacklogStepsStraightToTheCeilingAndAStepThatAddsTooLittleIsTakenBackWhole() {
        var l = HostConnectionLimit(floor: 6, ceiling: 16, now: 0)
        let backlog = HostConnectionLimit.backlogRounds * 16
        XCTAssertTrue(window(&l, start: 0, seconds: 0.2, completions: 12, latency: 0.05, backlog: backlog))
        XCTAssertEqual(l.limit, 16, "enough waiting items for four rounds of the ceiling: one step to it")
        XCTAssertFalse(window(&l, start: 0.2, seconds: 0.2, completions: 32, latency: 0.05, backlog: backlog), "it settles")
        XCTAssertTrue(window(&l, start: 0.4, seconds: 0.6, completions: 32, latency: 0.05, backlog: backlog),
                      "53 a second against 60 at six connections: the server is the bottleneck")
        XCTAssertEqual(l.limit, 6, "the whole step is taken back")
        XCTAssertEqual(l.reason, "no more throughput")

        var m = HostConnectionLimit(floor: 6, ceiling: 16, now: 0)
        _ = window(&m, start: 0, seconds: 0.2, completions: 12, latency: 0.05, backlog: backlog - 1)
        XCTAssertEqual(m.limit, 9, "a smaller backlog: the usual step")
    }

    /// In the scheduler: 500 items of one HTTP/1.1 host step from `perHost` to `perHostMax` after
    /// the first window, never past it.
    func testTheSchedulerStepsAHostWithABacklogToItsCeiling() {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        var s = Scheduler(configuration: .init(concurrency: 32, perHost: 6, perHostMax: 16), timeZone: TimeZone(identifier: "UTC")!)
        for k in 0..<500 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        func starts(_ now: Date) -> [ItemKey] {
            s.nextActions(now: now).compactMap { if case .start(let k) = $0 { return k } else { return nil } }
        }
        var running = starts(t0)
        XCTAssertEqual(running.count, 6)
        var now = t0
        for _ in 0..<2 {
            now = now.addingTimeInterval(0.1)
            for k in running { s.finished(k) }
            running = starts(now)
        }
        XCTAssertEqual(running.count, 16, "one step to --per-host-max")
        XCTAssertEqual(s.takeHostLimitChanges().map(\.limit), [16])
        XCTAssertTrue(starts(now).isEmpty, "never more than the ceiling")
    }
}
