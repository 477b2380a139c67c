import Foundation
import SpoolCore
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// The daemon's ports for `ItemExecutor`: each effect the item machine decides reaches the room
/// that owns it (the scheduler, the transfer driver and content store, the space gate,
/// publishing, the item's files and its ending). Thin: what a room does lives in the room; here
/// is only which room, and the facts the machine decides with. Engine thread only.
final class ItemShell: ItemPorts {
    typealias Key = ItemRecord
    typealias Part = StagingFile
    typealias Job = PublishJob

    /// Not owned: the engine owns the executor, which owns this.
    unowned(unsafe) let engine: Engine

    init(engine: Engine) { self.engine = engine }

    // MARK: The machines

    var policy: RetryPolicy { engine.items.policy }

    func decide(_ record: ItemRecord, _ event: ItemEvent,
                _ decide: (inout ItemLifecycle, ItemContext) -> [ItemAction]) -> [ItemAction] {
        // Ended: nothing changes (the machine says so too); an event queued behind the
        // ending costs no context.
        if record.phase.hasEnded { return [] }
        let engine = engine
        let now = Date()
        let urls = engine.driver.urls
        // The failure facts are read only if the event fails the item; their closure lives on
        // this call's stack (no allocation per event), the machine being done with it on return.
        let actions = withoutActuallyEscaping({ engine.failureFacts(of: record, urls: urls, at: now) }) { failureFacts in
            // The facts besides the event: whether the daemon stops, a fresh jitter, the failure
            // facts to read if it fails, whether the refresh hook may be asked (once an attempt,
            // for the request's own URL), and for an item with mirrors whether another source is
            // left and its host has been down past `--mirror-after` (asked only then).
            var context = LifecycleContext(now: now, stopping: engine.runState.stopping, jitter: engine.items.jitter.next(),
                                           failureFacts: failureFacts)
            context.canRefreshURL = engine.hooks.refreshHook != nil && record.refreshedInAttempt != record.attempts
                && record.sourceIndex == 0
            if record.summary.hasMirrors {
                context.nextSource = record.sources?.hasNext ?? true
                context.hostDownLong = engine.hosts.downLong(record, now: now)
            }
            return decide(&record.lifecycle, context)
        }
        if !actions.isEmpty {
            engine.items.table.note(record)
            // The report is written later in the turn.
            engine.operators.status.markDirty()
        }
        return actions
    }

    // MARK: The scheduler

    func schedule(_ record: ItemRecord) {
        engine.hosts.scheduler.submit(ScheduledItem(key: record.key, hostKey: record.hostKey,
                                                    priority: SchedulingPriority(record.priority),
                                                    earliestStart: record.earliestStart,
                                                    discretionary: record.discretionary))
    }

    func unschedule(_ record: ItemRecord) { engine.hosts.scheduler.remove(record.key) }

    func releaseSlot(_ record: ItemRecord) { engine.hosts.scheduler.finished(record.key) }

    func retry(_ record: ItemRecord, at: Date, holdHost: Bool) {
        // The server asked for a pause (429/503): back off the whole host, not just this item.
        if holdHost { engine.hosts.scheduler.holdHost(record.hostKey, until: at) }
        engine.hosts.scheduler.retry(record.key, notBefore: at)
        engine.logger.info("transfer failed; will retry", metadata: [
            "item": "\(record.id)", "url": "\(engine.driver.urls.shown(record.loaded?.url.string ?? ""))",
            "error": "\(record.lastFailure.map { "\($0)" } ?? "")",
            "attempt": "\(record.attempts)", "retry-in": "\(String(format: "%.1f", max(0, at.timeIntervalSinceNow)))s"])
    }

    func hostUnreachable(_ record: ItemRecord, error: String) { engine.hostUnreachable(record, error: error) }

    // MARK: The transfer

    func checkStart(_ record: ItemRecord) -> StartCheck {
        engine.driver.startCheck(record, requestFile: engine.items.requestFile)
    }

    func startTransfer(_ record: ItemRecord, credentials: [RequestHeader]) {
        let engine = engine
        guard let item = record.loaded else { preconditionFailure("startTransfer before prepareStart loaded the item") }
        if let upload = item.upload {
            // A file that is gone or changed fails the item with `upload-changed`, sending nothing.
            do throws(UploadStartError) {
                try engine.driver.startUpload(record, item, upload, credentials: credentials)
            } catch {
                switch error {
                case .refused(let refusal):
                    engine.send(.refusedBeforeRequest(code: refusal.rule, message: refusal.reason), to: record)
                case .session(let e):
                    engine.send(.couldNotStart(StartProblem(errno: e.errno), message: "\(e)"), to: record)
                }
            }
            return
        }
        if let contentStore = engine.driver.contentStore,
           contentStore.start(record, item, credentials: credentials, send: { engine.send($0, to: record) },
                              openPart: { () throws(StoreError) in try engine.openFreshPart(record) }) {
            // A waiter for another item's fetch holds no connection meanwhile.
            if contentStore.isWaiting(record.key) { engine.hosts.scheduler.park(record.key) }
            return
        }
        engine.startFetch(record, item, credentials: credentials)
    }

    func stopTransfer(_ record: ItemRecord, part: StagingFile?) {
        engine.driver.contentStore?.forget(record.key)
        engine.driver.stop(record, part: part)
    }

    func nextSource(_ record: ItemRecord, part: StagingFile?) {
        engine.driver.moveToNextSource(record, part: part, requestFile: engine.items.requestFile)
    }

    func saveResumeState(_ record: ItemRecord, part: StagingFile?) { engine.driver.saveResumeState(record, part: part) }

    func refreshURL(_ record: ItemRecord, reason: String) -> ItemEvent? {
        engine.hooks.askForFreshURL(record, reason: reason, logger: engine.logger, urls: engine.driver.urls)
    }

    // MARK: The space gate

    func waitForSpace(_ record: ItemRecord, reason: String) {
        engine.space.wait(record, reason: reason, running: engine.driver.running.values)
        engine.operators.metrics.metrics.spaceWait()
    }

    func leaveSpaceQueue(_ record: ItemRecord) { engine.space.leave(record) }

    // MARK: Publishing

    func publish(_ record: ItemRecord, sha256 digest: String, part: StagingFile?) -> PublishJob? {
        if record.summary.isUpload {
            engine.publishing.recordUpload(record, digest: digest)
            return nil
        }
        guard let part else { return nil }
        return engine.publishing.publish(record, digest: digest, part: part,
                                         fromStore: engine.driver.contentStore?.servedFromStore(record.key) ?? false)
    }

    func retryPublish(_ record: ItemRecord, job: PublishJob?, at: Date) {
        guard let job else { return }
        if at > Date() {
            engine.logger.info("publish will be tried again at \(RFC3339.format(at))", metadata: ["item": "\(record.id)"])
        }
        engine.publishing.retry(job, at: at)
    }

    func withdrawPublish(_ record: ItemRecord) -> Bool { engine.publishing.withdraw(base: record.base) }

    // MARK: The item's files and its ending

    func discardPartial(_ record: ItemRecord) { record.partial.discard() }

    func keepPartialForRetry(_ record: ItemRecord) {
        let layout = engine.store.layout
        if KeptParts.keep(record.base, in: layout) {
            engine.logger.info("partial kept for spoolfetch retry", metadata: [
                "item": "\(record.id)", "bytes": "\(record.bytesOnDisk)", "part": "\(layout.staging.path(of: record.base + ".kept.part"))"])
        }
    }

    func failed(_ record: ItemRecord, _ failure: ItemFailed, wasPublishing: Bool) {
        engine.fail(record, failure, wasPublishing: wasPublishing)
    }

    func ended(_ record: ItemRecord) { engine.itemEnded(record) }
}
