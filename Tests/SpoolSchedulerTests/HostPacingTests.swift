import Foundation
@testable import SpoolScheduler
import XCTest

/// Pacing a host that limits its clients' rate (`HostPace`), one test per rule, with an injected
/// clock; and a simulated server allowing 40 requests a second with no burst (nginx `limit_req`).
final class HostPacingTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let utc = TimeZone(identifier: "UTC")!

    private func starts(_ actions: [SchedulerAction]) -> [ItemKey] {
        actions.compactMap { if case .start(let k) = $0 { return k } else { return nil } }
    }

    private func scheduler(items: Int = 100) -> Scheduler {
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6), timeZone: utc)
        for k in 0..<items { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        return s
    }

    func testTheFirstRefusalPacesTheHostAtHalfItsRecentRateInSlowStart() {
        var s = scheduler()
        let first = starts(s.nextActions(now: t0))
        XCTAssertEqual(first.count, 6)
        XCTAssertTrue(s.hostRefused("a:80", now: t0, retryAfter: nil), "a paced refusal is free")
        let pace = s.hostPaces["a:80"]!
        XCTAssertEqual(pace.rate, 3, "6 starts in the last second, halved")
        XCTAssertTrue(pace.slowStart)
        for k in first.dropFirst() { s.retry(k, notBefore: t0); _ = s.hostRefused("a:80", now: t0, retryAfter: nil) }
        XCTAssertEqual(s.hostPaces["a:80"]!.rate, 3, "refusals of requests already in flight decrease nothing")
        s.finished(first[0])
        XCTAssertEqual(s.nextActions(now: t0), [], "paced: the next start waits 1/3 s after the last")
        XCTAssertEqual(s.nextWakeup(now: t0)?.timeIntervalSince(t0) ?? 0, 1.0 / 3, accuracy: 1e-6, "and the engine wakes for it")
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(1.0 / 3))).count, 1, "one start per interval")
    }

    func testSlowStartAddsTwoPerAnswerUntilARefusalDecreasesTheRate() {
        var s = scheduler()
        _ = s.nextActions(now: t0)
        s.hostRefused("a:80", now: t0, retryAfter: nil)
        for i in 1...10 { s.hostAnsweredRequest("a:80", now: t0.addingTimeInterval(Double(i) * 0.01)) }
        XCTAssertEqual(s.hostPaces["a:80"]!.rate, 23)
        s.hostRefused("a:80", now: t0.addingTimeInterval(2), retryAfter: nil)
        let pace = s.hostPaces["a:80"]!
        XCTAssertFalse(pace.slowStart)
        XCTAssertEqual(pace.rate, 23 * HostPace.decrease, accuracy: 1e-9, "multiplicative decrease")
        XCTAssertEqual(pace.refusedRate, 23)
        s.hostRefused("a:80", now: t0.addingTimeInterval(2.5), retryAfter: nil)
        XCTAssertEqual(s.hostPaces["a:80"]!.rate, 23 * HostPace.decrease, accuracy: 1e-9, "at most one decrease a second")
    }

    func testPastSlowStartTheRateRecoversFastThenProbesAdditively() {
        var s = scheduler()
        _ = s.nextActions(now: t0)
        s.hostRefused("a:80", now: t0, retryAfter: nil)
        for i in 1...18 { s.hostAnsweredRequest("a:80", now: t0.addingTimeInterval(Double(i) * 0.01)) }
        XCTAssertEqual(s.hostPaces["a:80"]!.rate, 39)
        s.hostRefused("a:80", now: t0.addingTimeInterval(2), retryAfter: nil)   // 39 × 0.75 = 29.25
        s.hostAnsweredRequest("a:80", now: t0.addingTimeInterval(2.1))
        XCTAssertEqual(s.hostPaces["a:80"]!.rate, 30.25, accuracy: 1e-9, "below 0.9 × the refused rate: one more per answer")
        for i in 0..<5 { s.hostAnsweredRequest("a:80", now: t0.addingTimeInterval(2.2 + Double(i) * 0.01)) }
        let near = s.hostPaces["a:80"]!.rate
        XCTAssertGreaterThanOrEqual(near, 0.9 * 39)
        s.hostAnsweredRequest("a:80", now: t0.addingTimeInterval(3))
        XCTAssertEqual(s.hostPaces["a:80"]!.rate, near + HostPace.increase / near, accuracy: 1e-9, "then additive: +increase/rate")
    }

    func testRetryAfterHoldsTheHostBesidesItsRate() {
        var s = scheduler()
        let first = starts(s.nextActions(now: t0))
        for k in first { s.retry(k, notBefore: t0) }
        s.hostRefused("a:80", now: t0, retryAfter: 5)
        XCTAssertEqual(s.nextActions(now: t0.addingTimeInterval(4.9)), [])
        XCTAssertEqual(s.nextWakeup(now: t0.addingTimeInterval(4.9)), t0.addingTimeInterval(5))
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(5))).count, 1)
        s.releaseHold("a:80")
        XCTAssertEqual(s.hostPaces["a:80"]!.holdUntil, 0, "an operator's retry lifts the hold")
    }

    func testRateLimitHeadersHoldUntilTheResetAndCapTheRateAtThePolicy() {
        var facts = RateLimitFacts()
        XCTAssertTrue(facts.read(name: "ratelimit", value: "\"default\";r=0;t=7"))
        XCTAssertTrue(facts.read(name: "ratelimit-policy", value: "\"default\";q=100;w=10"))
        XCTAssertFalse(facts.read(name: "content-type", value: "text/plain"))
        XCTAssertEqual(facts, RateLimitFacts(remaining: 0, reset: 7, quota: 100, window: 10))
        var older = RateLimitFacts()
        _ = older.read(name: "ratelimit-remaining", value: "0")
        _ = older.read(name: "ratelimit-reset", value: "3")
        _ = older.read(name: "ratelimit-policy", value: "50;w=60")
        XCTAssertEqual(older, RateLimitFacts(remaining: 0, reset: 3, quota: 50, window: 60))

        var s = scheduler()
        let first = starts(s.nextActions(now: t0))
        s.hostRateLimit("a:80", facts, now: t0)
        XCTAssertEqual(s.hostPaces["a:80"]!.rate, 10, "100 per 10 s")
        for k in first { s.finished(k) }
        XCTAssertEqual(s.nextActions(now: t0.addingTimeInterval(6.9)), [], "nothing remaining: held until the reset")
        XCTAssertEqual(starts(s.nextActions(now: t0.addingTimeInterval(7))).count, 1)
        for i in 0..<100 { s.hostAnsweredRequest("a:80", now: t0.addingTimeInterval(7 + Double(i) * 0.1)) }
        XCTAssertEqual(s.hostPaces["a:80"]!.rate, 10, "never above the policy")
    }

    func testRefusalsAreFreeOnlyWhileTheHostAnswersAndACalmHostIsNoLongerPaced() {
        var s = scheduler()
        _ = s.nextActions(now: t0)
        XCTAssertTrue(s.hostRefused("a:80", now: t0, retryAfter: nil))
        XCTAssertTrue(s.hostRefused("a:80", now: t0.addingTimeInterval(599), retryAfter: nil))
        XCTAssertFalse(s.hostRefused("a:80", now: t0.addingTimeInterval(601), retryAfter: nil),
                       "nothing but refusals for 10 minutes: down, not busy; attempts count again")
        s.hostAnsweredRequest("a:80", now: t0.addingTimeInterval(602))
        XCTAssertTrue(s.hostRefused("a:80", now: t0.addingTimeInterval(603), retryAfter: nil))
        s.hostAnsweredRequest("a:80", now: t0.addingTimeInterval(603 + HostPace.calmAfter))
        XCTAssertNil(s.hostPaces["a:80"], "no refusal for a minute: no longer paced")
    }

    /// A server allowing 40 requests a second with no burst (a request less than 25 ms after the
    /// last accepted one is refused), 300 requests of 5 ms each: all served within 1.5 × the
    /// server's floor of 7.5 s, and the engine always has a wake-up while items wait.
    func testAgainstASimulatedFortyPerSecondServerTheBatchFinishesNearItsFloor() {
        var s = scheduler(items: 300)
        var now = t0.timeIntervalSince1970
        var lastAccepted = -Double.infinity
        var running: [(key: ItemKey, ends: Double)] = []
        var served = 0, refused = 0
        var steps = 0
        while served < 300 && steps < 100_000 {
            steps += 1
            for k in starts(s.nextActions(now: Date(timeIntervalSince1970: now))) {
                let arrives = now + Double.random(in: 0...0.003)
                if arrives - lastAccepted >= 0.025 { lastAccepted = arrives; running.append((k, now + 0.005)) }
                else { running.append((-1 - k, now + 0.001)) }
            }
            let next = [s.nextWakeup(now: Date(timeIntervalSince1970: now))?.timeIntervalSince1970, running.map(\.ends).min()]
                .compactMap { $0 }.min()
            guard let next else { XCTFail("items wait with no wake-up at \(now - t0.timeIntervalSince1970) s"); return }
            now = max(now, next)
            for done in running.filter({ $0.ends <= now }) {
                if done.key >= 0 {
                    s.finished(done.key); served += 1
                    s.hostAnsweredRequest("a:80", now: Date(timeIntervalSince1970: now))
                } else {
                    refused += 1
                    s.retry(-1 - done.key, notBefore: Date(timeIntervalSince1970: now))
                    _ = s.hostRefused("a:80", now: Date(timeIntervalSince1970: now), retryAfter: nil)
                }
            }
            running.removeAll { $0.ends <= now }
        }
        let seconds = now - t0.timeIntervalSince1970
        XCTAssertEqual(served, 300)
        XCTAssertLessThanOrEqual(seconds, 1.5 * 7.5, "\(seconds) s, \(refused) refused")
        XCTAssertLessThanOrEqual(refused, 60)
    }
}
