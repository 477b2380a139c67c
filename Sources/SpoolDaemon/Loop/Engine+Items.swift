import Foundation
import SpoolCore
import SpoolMetrics
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// Where item events go in: `ItemExecutor` (SpoolCore), the one owner that hands each event to
/// the item's lifecycle and carries out the actions, reaching the rooms through `ItemShell`, the
/// daemon's ports (scheduler, transfer driver, space gate, publishing, item endings). The
/// simulator drives the same executor with simulated ports. The decisions are all in `ItemLifecycle`.
extension Engine {
    /// Hands `event` to the item's lifecycle and carries out the actions; returns them. An event
    /// raised while actions are carried out (by this item's or another's) is queued and handled
    /// after them (`SerialEvents`): then it returns nil, having decided nothing yet.
    @discardableResult
    func send(_ event: ItemEvent, to record: ItemRecord) -> [ItemAction]? {
        executor.send(event, to: record)
    }

    func couldNotStart(_ record: ItemRecord, _ problem: StartProblem, _ message: String) {
        if problem == .shortOfResources {
            logger.warning("could not open the item's files (out of runState.descriptors or memory); it waits and tries again",
                           metadata: ["item": "\(record.id)", "error": "\(message)"])
        }
        send(.couldNotStart(problem, message: message), to: record)
    }

    // MARK: Endings

    /// The item failed for good (`failed`: the record its failed phase holds, made by the machine
    /// with the facts `failureFacts` gave): its part removed, its state written. The executor
    /// ends it after (`itemEnded`).
    func fail(_ record: ItemRecord, _ failed: ItemFailed, wasPublishing: Bool) {
        let failure = ItemFailure(failed)
        let url = failure.url
        driver.fileFailedUpload(record, code: failed.code, io: io)
        if wasPublishing { publishing.drop(base: record.base) }
        store.removePart(record.base)
        driver.writeState(record, ItemState(request: record.request.name, index: record.index,
                                            url: url, phase: .failed, attempts: record.attempts,
                                            failure: failure))
        logger.warning("item failed: \(failed.message)", metadata: ["item": "\(record.id)", "url": "\(url)",
                                                                    "code": "\(failed.code)"])
    }

    func itemEnded(_ record: ItemRecord) {
        operators.status.itemEnded(StatusReporter.task(record, now: Date(), progress: nil, window: nil, hostWait: nil, urls: driver.urls))
        let request = record.request
        switch record.phase {
        case .published(let file, _):
            runState.summary.published += 1
            operators.metrics.metrics.itemEnded(outcome: record.endedUnchanged ? "unchanged" : "published",
                                      seconds: record.startedAt.map { Date().timeIntervalSince($0) })
            logger.debug(record.endedUnchanged ? "unchanged (304): nothing published" : "published",
                         metadata: ["item": "\(record.id)", "file": "\(file)"])
        case .failed(let failure):
            runState.summary.failed += 1
            operators.metrics.metrics.itemEnded(outcome: "failed", code: failure.code,
                                      seconds: record.startedAt.map { Date().timeIntervalSince($0) })
        default: break
        }
        hooks.itemEnded(record)
        driver.contentStore?.itemEnded(record.key)
        // The group end first: when this item ends it, its marker takes the URL from the
        // description the item still holds instead of reading the request file again.
        groupEnds.carryOut(request.groupEnd.handle(.itemEnded, now: Date()), for: request)
        record.shed()
    }

    // MARK: Hosts

    /// The item's transfer did not reach its host: the items `Hosts` names look at their resource
    /// timeout, then those with mirrors move on once the outage has lasted long enough.
    func hostUnreachable(_ record: ItemRecord, error: String) {
        let now = Date()
        guard let checks = hosts.unreachable(record, error: error, table: items.table,
                                             resourceTimeout: items.policy.resourceTimeout, now: now) else { return }
        for other in checks { send(.deadlineCheck, to: other) }
        for other in hosts.itemsMovingToMirrors(from: record, table: items.table, now: now) {
            send(.sourceUnreachable, to: other)
        }
    }

    /// Something of the item's host answered (`ended`: at its transfer's end). Returns whether the
    /// answer was a paced host's refusal that costs no attempt.
    @discardableResult
    func hostAnswered(_ record: ItemRecord, _ facts: ResponseFacts, ended: Bool = false) -> Bool {
        let answer = hosts.answered(record, facts, ended: ended, now: Date())
        if answer.reachableAgain { operators.status.markDirty() }
        return answer.free
    }
}
