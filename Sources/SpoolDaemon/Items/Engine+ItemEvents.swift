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
    /// Hands `event` to the item's lifecycle and carries out the actions; returns them.
    @discardableResult
    func send(_ event: ItemEvent, to record: ItemRecord) -> [ItemAction] {
        let now = Date()
        var context = LifecycleContext(now: now, stopping: stopping, jitter: jitter.next(),
                                       failureFacts: { [urls] in record.failureFacts(urls: urls, at: now) })
        context.canRefreshURL = hooks.refreshHook != nil && record.refreshedInAttempt != record.attempts
            && record.sourceIndex == 0
        if record.summary.hasMirrors {
            context.nextSource = record.sources?.hasNext ?? true
            context.hostDownLong = hostDownLong(record, now: now)
        }
        // The phase it leaves: its actions may still need what it held (the part a stopped
        // transfer keeps, the one a verified body is published from). It is let go, and a part
        // no phase holds any more closed, when this call returns.
        let leaving = record.lifecycle.state
        let actions = record.lifecycle.handle(event, policy: policy, context: context)
        if !actions.isEmpty { table.note(record) }
        for action in actions { perform(action, for: record, leaving: leaving) }
        if !actions.isEmpty { status.markDirty() }
        return actions
    }

    private func perform(_ action: ItemAction, for record: ItemRecord, leaving: ItemLifecycle.State) {
        switch action {
        case .schedule:
            scheduler.submit(ScheduledItem(key: record.key, hostKey: record.hostKey,
                                           priority: SchedulingPriority(record.priority),
                                           earliestStart: record.earliestStart,
                                           discretionary: record.discretionary))
        case .unschedule:
            scheduler.remove(record.key)
        case .releaseSlot:
            scheduler.finished(record.key)
        case .prepareStart:
            send(.startChecked(startCheck(record, now: Date())), to: record)
        case .startTransfer(let credentials):
            guard let item = record.loaded else { preconditionFailure("startTransfer before prepareStart loaded the item") }
            if let upload = item.upload {
                startUpload(record, item, upload, credentials: credentials)
                return
            }
            if let contentStore, contentStore.start(record, item, credentials: credentials, send: { send($0, to: record) },
                                                    openPart: { () throws(StoreError) in try openFreshPart(record) }) { return }
            startFetch(record, item, credentials: credentials)
        case .stopTransfer:
            contentStore?.forget(record.key)
            driver.stop(record, part: leaving.part)
        case .refreshURL(let reason):
            askForFreshURL(record, reason: reason)
        case .nextSource:
            moveToNextSource(record, part: leaving.part)
        case .retry(let at, let holdHost):
            // The server asked for a pause (429/503): back off the whole host, not just this item.
            if holdHost { scheduler.holdHost(record.hostKey, until: at) }
            scheduler.retry(record.key, notBefore: at)
            logger.info("transfer failed; will retry", metadata: [
                "item": "\(record.id)", "url": "\(urls.shown(record.loaded?.url.string ?? ""))", "error": "\(record.lastFailure.map { "\($0)" } ?? "")",
                "attempt": "\(record.attempts)", "retry-in": "\(String(format: "%.1f", max(0, at.timeIntervalSinceNow)))s"])
        case .waitForSpace(let reason):
            space.wait(record, reason: reason, running: driver.running.values)
            metrics.metrics.spaceWait()
        case .leaveSpaceQueue:
            space.leave(record)
        case .discardPartial:
            record.partial.discard()
        case .saveResumeState:
            driver.saveResumeState(record, part: leaving.part)
        case .publish(let digest):
            if record.summary.isUpload {
                publishing.recordUpload(record, digest: digest)
            } else if let part = leaving.part, let job = publishing.publish(record, digest: digest, part: part,
                                                                            fromStore: contentStore?.servedFromStore(record.key) ?? false) {
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
            logger.warning("could not open the item's files (out of descriptors or memory); it waits and tries again",
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
        fileFailedUpload(record)
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
        status.itemEnded(StatusReporter.task(record, now: Date(), progress: nil, window: nil, urls: urls))
        let request = record.request
        request.open -= 1
        switch record.phase {
        case .published(let file, _):
            summary.published += 1
            metrics.metrics.itemEnded(outcome: record.endedUnchanged ? "unchanged" : "published",
                                      seconds: record.startedAt.map { Date().timeIntervalSince($0) })
            logger.debug(record.endedUnchanged ? "unchanged (304): nothing published" : "published",
                         metadata: ["item": "\(record.id)", "file": "\(file)"])
        case .failed(let failure):
            summary.failed += 1
            metrics.metrics.itemEnded(outcome: "failed", code: failure.code,
                                      seconds: record.startedAt.map { Date().timeIntervalSince($0) })
        default: break
        }
        hooks.itemEnded(record)
        contentStore?.itemEnded(record.key)
        record.shed()
        if request.open == 0 { groupEnds.end(request) }
    }

}

extension ItemRecord {
    /// What the failure record of this item says beside its code and message: its URL and name
    /// (re-read from the request file if not loaded), the last response's status, curl code and
    /// final URL, and the time it spent unable to reach its host.
    func failureFacts(urls: URLPrivacy, at now: Date) -> ItemFailureFacts {
        var curlCode: Int? = nil, curlText: String? = nil
        if case .curl(let c, let t) = lastFailure { curlCode = c; curlText = t }
        let status = lastFacts?.httpStatus
        let finalURL = lastFacts?.finalURL
        let item = details
        return ItemFailureFacts(index: index, url: urls.shown(item?.url.string ?? ""), name: item?.name ?? "",
                                httpStatus: status == 0 ? nil : status, curlCode: curlCode, curlError: curlText,
                                finalURL: finalURL == item?.url.string ? nil : urls.shown(finalURL),
                                outageSeconds: outageSeconds(at: now))
    }

    /// `on-exists: replace`, and `skip-unchanged` when the resource changed: the new file takes
    /// the final name in place of the old one (never a `-N` name).
    var replacesExisting: Bool { (details?.onExists ?? request.settings.onExists) != .keepBoth }

    /// Ended with the file already published, a 304 having confirmed it (`skip-unchanged`).
    var endedUnchanged: Bool {
        guard case .published = phase else { return false }
        return lastFacts?.httpStatus == 304
    }
}

extension SchedulingPriority {
    init(_ p: Priority) {
        switch p { case .low: self = .low; case .normal: self = .normal; case .high: self = .high }
    }
}
