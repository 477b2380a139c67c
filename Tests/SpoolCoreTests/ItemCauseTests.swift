import Foundation
import SpoolCore
import SpoolScheduler
import XCTest

/// `ItemCause`: what a deadline's or a cancel's ending says the item waited on or last failed
/// with, decided by the machine from the phase it leaves and the shell's facts.
final class ItemCauseTests: XCTestCase {
    typealias Machine = ItemMachine<Int, Int, Int>
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let policy = RetryPolicy(maxAttempts: 0, resourceTimeout: 3600, backoff: Backoff(base: 10, cap: 60))

    private func context(hostWait: HostWait? = nil, start: Date? = nil, last: (String, String)? = nil,
                         status: Int? = nil, shell: Bool = true) -> ItemContext {
        let t0 = self.t0
        return ItemContext(now: t0, stopping: false, jitter: 1) {
            var facts = ItemFailureFacts(index: 0, url: "http://h/x", name: "x", httpStatus: status)
            if shell {
                facts.cause = ItemCauseFacts(status: ItemStatusFacts(now: t0, earliestStart: start, discretionary: false, window: nil,
                                                                     timeZone: TimeZone(identifier: "UTC")!, hostKey: "h:80",
                                                                     hostWait: hostWait),
                                             lastFailureCode: last?.0, lastFailure: last?.1)
            }
            return facts
        }
    }

    private func ended(_ events: [ItemEvent<Int, Int, Int>], by last: ItemEvent<Int, Int, Int>, _ context: ItemContext) -> ItemFailed? {
        var m = Machine(firstQueued: t0)
        for e in [.submitted] + events { _ = m.handle(e, policy: policy, context: self.context()) }
        _ = m.handle(last, policy: policy, context: context)
        guard case .failed(let failed) = m.phase else { return nil }
        return failed
    }

    func testADeadlineAfterA500NamesTheStatusTheAttemptsAndTheBackOff() throws {
        let fault = TransferFault(code: "http-status", description: "HTTP status 500", httpStatus: 500, isTransient: true)
        let failed = try XCTUnwrap(ended([.slotGranted(space: .fits), .transferEnded(TransferEnd(fault: fault, hasPartial: false))],
                                         by: .deadlinePassed, context(last: ("http-status", "HTTP status 500"), status: 500)))
        XCTAssertEqual(failed.code, "deadline")
        let cause = try XCTUnwrap(failed.cause)
        XCTAssertEqual(cause.code, "http-status")
        XCTAssertEqual(cause.httpStatus, 500)
        XCTAssertEqual(cause.attempts, 1)
        XCTAssertEqual(cause.waitingFor, "retrying")
        XCTAssertEqual(cause.host, "h:80")
        XCTAssertTrue(cause.message.hasPrefix("HTTP status 500 (1 attempt; it was retrying; next try at "), cause.message)
    }

    func testADeadlineBehindADownHostNamesTheHostAndItsCurlCode() throws {
        let outage = HostOutage(hostKey: "h:80", since: t0, lastError: "curl error 7: Couldn't connect to server", failures: 3,
                                nextProbe: t0.addingTimeInterval(8), probe: nil)
        let cause = try XCTUnwrap(ended([], by: .deadlinePassed, context(hostWait: .unreachable(outage)))?.cause)
        XCTAssertEqual(cause.code, "host-unreachable")
        XCTAssertEqual(cause.curlCode, 7, "the host's last error, for an item that never ran")
        XCTAssertEqual(cause.attempts, 0)
        XCTAssertEqual(cause.waitingFor, "pending")
        XCTAssertEqual(cause.message, "host h:80 unreachable since 2027-01-15T08:00:00Z; next probe 2027-01-15T08:00:08Z; "
                       + "last error: curl error 7: Couldn't connect to server")
    }

    func testACancelNamesWhatTheItemWaitedFor() throws {
        let start = t0.addingTimeInterval(3600)
        let waiting = try XCTUnwrap(ended([], by: .operatorCommand(.cancel), context(start: start))?.cause)
        XCTAssertEqual(waiting.code, "waiting-start")
        XCTAssertEqual(waiting.message, "it waited for its earliest start (2027-01-15T09:00:00Z)")
        let paused = try XCTUnwrap(ended([.operatorCommand(.pause)], by: .operatorCommand(.cancel), context())?.cause)
        XCTAssertEqual(paused.code, "paused")
        XCTAssertEqual(paused.message, ItemStatus.pausedWaitsFor)
        // Without the shell's facts (a simulation that gives none): the phase alone.
        let bare = try XCTUnwrap(ended([.operatorCommand(.pause)], by: .operatorCommand(.cancel), context(shell: false))?.cause)
        XCTAssertEqual(bare.code, "paused")
        XCTAssertNil(bare.host)
    }

    func testOtherEndingsCarryNoCause() throws {
        let fault = TransferFault(code: "http-status", description: "HTTP status 404", httpStatus: 404)
        let failed = try XCTUnwrap(ended([.slotGranted(space: .fits)], by: .transferEnded(TransferEnd(fault: fault, hasPartial: false)),
                                         context(status: 404)))
        XCTAssertEqual(failed.code, "http-status")
        XCTAssertNil(failed.cause)
    }
}
