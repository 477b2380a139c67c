import Foundation
import SpoolCore
import SpoolMetrics
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// Item events go in through `executor` (`ItemExecutor`, SpoolCore: `executor.send(event, to:
/// record)`), which hands each to the item's lifecycle and carries out the actions through
/// `ItemShell`, the daemon's ports. Here: the start problems the loop reports, and the answers of
/// hosts. The decisions are all in `ItemLifecycle`.
extension Engine {
    func couldNotStart(_ record: ItemRecord, _ problem: StartProblem, _ message: String) {
        if problem == .shortOfResources {
            logger.warning("could not open the item's files (out of runState.descriptors or memory); it waits and tries again",
                           metadata: ["item": "\(record.id)", "error": "\(message)"])
        }
        executor.send(.couldNotStart(problem, message: message), to: record)
    }

    // MARK: Hosts

    /// Something of the item's host answered (`ended`: at its transfer's end). Returns whether the
    /// answer was a paced host's refusal that costs no attempt.
    @discardableResult
    func hostAnswered(_ record: ItemRecord, _ facts: ResponseFacts, ended: Bool = false) -> Bool {
        let answer = hosts.answered(record, facts, ended: ended, now: Date())
        if answer.reachableAgain { operators.status.dirty = true }
        return answer.free
    }
}
