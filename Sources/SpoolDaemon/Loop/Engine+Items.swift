import Foundation
import SpoolCore
import SpoolMetrics
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// Where item events go in and actions come out: each event goes to the item's lifecycle, and
/// each action it returns is carried out by the room that owns it (scheduler, transfer driver,
/// space gate, publishing, item endings). The decisions are all in `ItemLifecycle`.
extension Engine {
    /// Hands `event` to the item's lifecycle and carries out the actions; returns them. An event
    /// raised while actions are carried out (by this item's or another's) is queued and handled
    /// after them (`SerialEvents`): then it returns nil, having decided nothing yet.
    @discardableResult
    func send(_ event: ItemEvent, to record: ItemRecord) -> [ItemAction]? {
        var changed = false
        // The handler: the item's lifecycle takes the event and its actions are carried out.
        // Only the queue calls it, so no two run nested.
        let actions = items.events.post((event, record)) { (event, record) -> [ItemAction] in
            // Ended: nothing changes (the machine says so too); an event queued behind the
            // ending costs no context.
            if record.phase.hasEnded { return [] }
            let now = Date()
            let urls = driver.urls
            // The phase it leaves: its actions may still need what it held (the part a stopped
            // transfer keeps, the one a verified body is published from). It is let go, and a part
            // no phase holds any more closed, when this call returns.
            let leaving = record.lifecycle.state
            // The failure facts are read only if the event fails the item; their closure lives on
            // this call's stack (no allocation per event), the machine being done with it on return.
            let actions = withoutActuallyEscaping({ self.failureFacts(of: record, urls: urls, at: now) }) { failureFacts in
                // The facts besides the event: whether the daemon stops, a fresh jitter, the failure
                // facts to read if it fails, whether the refresh hook may be asked (once an attempt,
                // for the request's own URL), and for an item with mirrors whether another source is
                // left and its host has been down past `--mirror-after` (asked only then).
                var context = LifecycleContext(now: now, stopping: runState.stopping, jitter: items.jitter.next(), failureFacts: failureFacts)
                context.canRefreshURL = hooks.refreshHook != nil && record.refreshedInAttempt != record.attempts && record.sourceIndex == 0
                if record.summary.hasMirrors {
                    context.nextSource = record.sources?.hasNext ?? true
                    context.hostDownLong = hosts.downLong(record, now: now)
                }
                return record.lifecycle.handle(event, policy: items.policy, context: context)
            }
            if !actions.isEmpty {
                items.table.note(record)
                changed = true
            }
            for action in actions { perform(action, for: record, leaving: leaving) }
            return actions
        }
        // Once for the event and all it raised: the report is written later in the turn.
        if changed { operators.status.markDirty() }
        return actions
    }

    private func perform(_ action: ItemAction, for record: ItemRecord, leaving: ItemLifecycle.State) {
        switch action {
        case .schedule:
            hosts.scheduler.submit(ScheduledItem(key: record.key, hostKey: record.hostKey,
                                           priority: SchedulingPriority(record.priority),
                                           earliestStart: record.earliestStart,
                                           discretionary: record.discretionary))
        case .unschedule:
            hosts.scheduler.remove(record.key)
        case .releaseSlot:
            hosts.scheduler.finished(record.key)
        case .prepareStart:
            send(.startChecked(driver.startCheck(record, requestFile: items.requestFile)), to: record)
        case .startTransfer(let credentials):
            guard let item = record.loaded else { preconditionFailure("startTransfer before prepareStart loaded the item") }
            if let upload = item.upload {
                // A file that is gone or changed fails the item with `upload-changed`, sending nothing.
                do throws(UploadStartError) {
                    try driver.startUpload(record, item, upload, credentials: credentials)
                } catch {
                    switch error {
                    case .refused(let refusal): send(.refusedBeforeRequest(code: refusal.rule, message: refusal.reason), to: record)
                    case .session(let e): send(.couldNotStart(StartProblem(errno: e.errno), message: "\(e)"), to: record)
                    }
                }
                return
            }
            if let contentStore = driver.contentStore, contentStore.start(record, item, credentials: credentials, send: { send($0, to: record) },
                                                    openPart: { () throws(StoreError) in try openFreshPart(record) }) {
                // A waiter for another item's fetch holds no connection meanwhile.
                if contentStore.isWaiting(record.key) { hosts.scheduler.park(record.key) }
                return
            }
            startFetch(record, item, credentials: credentials)
        case .stopTransfer:
            driver.contentStore?.forget(record.key)
            driver.stop(record, part: leaving.part)
        case .refreshURL(let reason):
            if let event = hooks.askForFreshURL(record, reason: reason, logger: logger, urls: driver.urls) { send(event, to: record) }
        case .nextSource:
            driver.moveToNextSource(record, part: leaving.part, requestFile: items.requestFile)
        case .retry(let at, let holdHost):
            // The server asked for a pause (429/503): back off the whole host, not just this item.
            if holdHost { hosts.scheduler.holdHost(record.hostKey, until: at) }
            hosts.scheduler.retry(record.key, notBefore: at)
            logger.info("transfer failed; will retry", metadata: [
                "item": "\(record.id)", "url": "\(driver.urls.shown(record.loaded?.url.string ?? ""))", "error": "\(record.lastFailure.map { "\($0)" } ?? "")",
                "attempt": "\(record.attempts)", "retry-in": "\(String(format: "%.1f", max(0, at.timeIntervalSinceNow)))s"])
        case .waitForSpace(let reason):
            space.wait(record, reason: reason, running: driver.running.values)
            operators.metrics.metrics.spaceWait()
        case .leaveSpaceQueue:
            space.leave(record)
        case .discardPartial:
            record.partial.discard()
        case .saveResumeState:
            driver.saveResumeState(record, part: leaving.part)
        case .keepPartialForRetry:
            if KeptParts.keep(record.base, in: store.layout) {
                logger.info("partial kept for spoolfetch retry", metadata: [
                    "item": "\(record.id)", "bytes": "\(record.bytesOnDisk)", "part": "\(store.layout.staging.path(of: record.base + ".kept.part"))"])
            }
        case .publish(let digest):
            if record.summary.isUpload {
                publishing.recordUpload(record, digest: digest)
            } else if let part = leaving.part, let job = publishing.publish(record, digest: digest, part: part,
                                                                            fromStore: driver.contentStore?.servedFromStore(record.key) ?? false) {
                send(.publishQueued(job), to: record)
            }
        case .retryPublish(let at):
            guard let job = record.lifecycle.state.job else { return }
            if at > Date() {
                logger.info("publish will be tried again at \(RFC3339.format(at))", metadata: ["item": "\(record.id)"])
            }
            publishing.retry(job, at: at)
        case .withdrawPublish:
            if publishing.withdraw(base: record.base) { send(.publishWithdrawn, to: record) }
        case .fail(let code, let message):
            fail(record, code: code, message: message, wasPublishing: leaving.phase == .publishing || leaving.phase == .waitingToPublish)
        case .ended:
            itemEnded(record)
        case .hostUnreachable(let error):
            hostUnreachable(record, error: error)
        }
    }

    func couldNotStart(_ record: ItemRecord, _ problem: StartProblem, _ message: String) {
        if problem == .shortOfResources {
            logger.warning("could not open the item's files (out of runState.descriptors or memory); it waits and tries again",
                           metadata: ["item": "\(record.id)", "error": "\(message)"])
        }
        send(.couldNotStart(problem, message: message), to: record)
    }

    // MARK: Endings

    /// The item failed for good (its phase holds the whole record, made by the machine with the
    /// facts `failureFacts` gave): its part removed, its state written, then the ending.
    private func fail(_ record: ItemRecord, code: String, message: String, wasPublishing: Bool) {
        guard case .failed(let failed) = record.phase else { preconditionFailure("fail effect without a failed phase") }
        let failure = ItemFailure(failed)
        let url = failure.url
        driver.fileFailedUpload(record, code: code, io: io)
        if wasPublishing { publishing.drop(base: record.base) }
        store.removePart(record.base)
        driver.writeState(record, ItemState(request: record.request.name, index: record.index,
                                            url: url, phase: .failed, attempts: record.attempts,
                                            failure: failure))
        logger.warning("item failed: \(message)", metadata: ["item": "\(record.id)", "url": "\(url)",
                                                             "code": "\(code)"])
        itemEnded(record)
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
