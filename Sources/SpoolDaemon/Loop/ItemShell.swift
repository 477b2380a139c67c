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
    typealias Part = RunningAttempt
    typealias Job = PublishJob
    typealias Receipt = PublishedReceipt

    /// Not owned: the engine owns the executor, which owns this.
    unowned(unsafe) let engine: Engine
    /// The item being decided and the time it is decided at, for its failure facts (read only
    /// if the event fails it). One at a time: events never nest (`ItemExecutor`).
    private var deciding: (record: ItemRecord, at: Date)?
    /// The context every decision is given, made once: each event sets its facts anew. Its
    /// failure facts' closure reads `deciding` (one closure for the shell's life, none per event).
    private var context: LifecycleContext
    /// Set while a request's cancel ends its never-started items together (`endingQuietly`).
    private var quiet: QuietEnding?

    /// A request's cancel ending its items that never started, all in one command (see
    /// `Engine.requestCommand`): their failure records name only their index (the group end
    /// reads their URLs) and keep equal causes once; no state file or log line each (the
    /// request's cancel record and the command's line stand for them); no status or metric step
    /// each (the command counts them in one); no item hook past the listed-failures bound.
    /// Through the executor all the same: the machine decides, the ports carry out.
    struct QuietEnding {
        let causes: CauseSharing
        let now: Date
    }

    init(engine: Engine) {
        self.engine = engine
        context = LifecycleContext(now: Date(), stopping: false, jitter: engine.items.jitter.next())
        context.failureFacts = { [unowned self] in self.failureFactsOfDeciding() }
    }

    // MARK: The machines

    /// Runs `body` (its sends to the executor) with the items' endings quiet (`QuietEnding`).
    func endingQuietly<Result>(causes: CauseSharing, now: Date, _ body: () -> Result) -> Result {
        precondition(quiet == nil && !engine.executor.isHandling, "a quiet ending inside another event")
        quiet = QuietEnding(causes: causes, now: now)
        context.causeSharing = causes
        defer {
            quiet = nil
            context.causeSharing = nil
        }
        return body()
    }

    func decide(_ record: ItemRecord, _ event: ItemEvent) -> [ItemAction] {
        // Ended: nothing changes (the machine says so too); an event queued behind the
        // ending costs no context.
        if record.phase.hasEnded { return [] }
        let engine = engine
        let now = Date()
        // The facts besides the event: whether the daemon stops, a jitter no decision has used, the failure
        // facts to read if it fails, whether the refresh hook may be asked (once an attempt,
        // for the request's own URL), and for an item with mirrors whether another source is
        // left and its host has been down past `--mirror-after` (asked only then).
        deciding = (record, now)
        context.now = now
        context.stopping = engine.runState.stopping
        context.canRefreshURL = engine.hooks.refreshHook != nil && record.refreshedInAttempt != record.attempts
            && record.sourceIndex == 0
        if record.summary.hasMirrors {
            context.nextSource = record.sources?.hasNext ?? true
            context.hostDownLong = engine.hosts.downLong(record, now: now)
        } else {
            context.nextSource = false
            context.hostDownLong = false
        }
        let before = record.phase
        let actions = record.lifecycle.handle(event, policy: engine.items.policy, context: context)
        deciding = nil
        if !actions.isEmpty {
            // The table's indexes follow the phase: filed when it changed, and at the item's
            // first event (a recovered item enters them in the phase its recovery gave it).
            var first = false
            if case .submitted = event { first = true }
            if first || record.phase != before { engine.items.table.note(record) }
            // The report is written later in the turn.
            engine.operators.status.dirty = true
            // The jitter is spent only by a back-off (a retry's time): then the next decision
            // gets a fresh one. One no decision used is as random as a new one.
            for action in actions { if case .retry = action { context.jitter = engine.items.jitter.next(); break } }
        }
        return actions
    }

    private func failureFactsOfDeciding() -> ItemFailureFacts {
        guard let (record, now) = deciding else { preconditionFailure("failure facts asked outside a decision") }
        if let quiet {
            var facts = ItemFailureFacts(index: record.index, url: "", name: "")
            facts.cause = engine.causeFacts(of: record, at: quiet.now)
            return facts
        }
        return engine.failureFacts(of: record, urls: engine.driver.urls, at: now)
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

    /// The items `Hosts` names look at their resource timeout, then those with mirrors move on
    /// once the outage has lasted long enough (their events queued behind this one's).
    func hostUnreachable(_ record: ItemRecord, error: String) {
        let engine = engine
        let now = Date()
        guard let checks = engine.hosts.unreachable(record, error: error, table: engine.items.table,
                                                    resourceTimeout: engine.items.policy.resourceTimeout, now: now) else { return }
        for other in checks { engine.executor.send(.deadlineCheck, to: other) }
        for other in engine.hosts.itemsMovingToMirrors(from: record, table: engine.items.table, now: now) {
            engine.executor.send(.sourceUnreachable, to: other)
        }
    }

    // MARK: The transfer

    func checkStart(_ record: ItemRecord) -> StartCheck {
        engine.driver.startChecks.check(record, requestFile: engine.items.requestFile)
    }

    func startTransfer(_ record: ItemRecord, credentials: [RequestHeader]) {
        let engine = engine
        guard let item = record.loaded else { preconditionFailure("startTransfer before prepareStart loaded the item") }
        if let upload = item.upload {
            // A file that is gone or changed fails the item with `upload-changed`, sending nothing.
            do throws(UploadStartError) {
                // Its running phase holds the attempt: the descriptor its file is sent from.
                let attempt = try engine.driver.startUpload(record, item, upload, credentials: credentials)
                engine.executor.send(.partOpened(attempt), to: record)
            } catch {
                switch error {
                case .refused(let refusal):
                    engine.executor.send(.refusedBeforeRequest(code: refusal.rule, message: refusal.reason), to: record)
                case .session(let e):
                    engine.executor.send(.couldNotStart(StartProblem(errno: e.errno), message: "\(e)"), to: record)
                }
            }
            return
        }
        // With the store: a hit, a wait (its slot given back) or a claimed fetch (`StoreExecutor`).
        if let contentStore = engine.driver.contentStore { return contentStore.executor.startTransfer(record.key, credentials: credentials) }
        engine.startFetch(record, item, credentials: credentials, hashedMirror: nil)
    }

    func stopTransfer(_ record: ItemRecord, part: RunningAttempt?) {
        engine.driver.contentStore?.forget(record.key)
        engine.driver.stop(record, attempt: part)
    }

    func nextSource(_ record: ItemRecord, part: RunningAttempt?) {
        engine.driver.moveToNextSource(record, part: part?.file, requestFile: engine.items.requestFile)
    }

    func saveResumeState(_ record: ItemRecord, part: RunningAttempt?) { engine.driver.saveResumeState(record, part: part?.file) }

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

    func publish(_ record: ItemRecord, sha256 digest: String, part attempt: RunningAttempt?) -> PublishJob? {
        if record.summary.isUpload {
            engine.publishing.recordUpload(record, digest: digest)
            return nil
        }
        guard let part = attempt?.file else { return nil }
        return engine.publishing.publish(record, digest: digest, part: part,
                                         fromStore: engine.driver.contentStore?.executor.servedFromStore(record.key) ?? false)
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

    func discardPartial(_ record: ItemRecord) { record.partDiscarded() }

    func keepPartialForRetry(_ record: ItemRecord) {
        let layout = engine.store.layout
        if KeptParts.keep(record.base, in: layout) {
            engine.logger.info("partial kept for spoolfetch retry", metadata: [
                "item": "\(record.id)", "bytes": "\(record.bytesOnDisk)", "part": "\(layout.staging.path(of: record.base + ".kept.part"))"])
        }
    }

    /// Its part removed, its state written (`failed`: the record its failed phase holds, made
    /// by the machine with the facts `Engine.failureFacts` gave); the executor ends it after.
    func failed(_ record: ItemRecord, _ failed: ItemFailed, wasPublishing: Bool) {
        // A quiet ending's item never started: no part, no upload, no job; the request's cancel
        // record stands for its state file.
        if quiet != nil { return }
        let engine = engine
        let failure = ItemFailure(failed)
        let url = failure.url
        engine.driver.fileFailedUpload(record, code: failed.code, io: engine.io)
        if wasPublishing { engine.publishing.drop(base: record.base) }
        engine.store.removePart(record.base)
        engine.driver.writeState(record, ItemState(request: record.request.name, index: record.index,
                                                   url: url, phase: .failed, attempts: record.attempts,
                                                   failure: failure))
        engine.logger.warning("item failed: \(failed.message)", metadata: ["item": "\(record.id)", "url": "\(url)",
                                                                           "code": "\(failed.code)"])
    }

    /// Counted, reported and told to the hooks, the content store and its group.
    func ended(_ record: ItemRecord) {
        let engine = engine
        if let quiet {
            engine.runState.summary.failed += 1
            let request = record.request
            if request.items.count <= SpoolStore.listedFailuresLimit { engine.hooks.itemEnded(record) }
            engine.groupEnds.executor.send(.itemEnded, to: request, now: quiet.now)
            record.shed()
            return
        }
        engine.operators.status.itemEnded(record, urls: engine.driver.urls)
        let request = record.request
        var seconds: Double? = nil
        if let started = record.startedAt { seconds = Date().timeIntervalSince(started) }
        switch record.phase {
        case .published(let file, _):
            engine.runState.summary.published += 1
            engine.operators.metrics.metrics.itemEnded(outcome: record.endedUnchanged ? "unchanged" : "published",
                                                       seconds: seconds)
            engine.logger.debug(record.endedUnchanged ? "unchanged (304): nothing published" : "published",
                                metadata: ["item": "\(record.id)", "file": "\(file)"])
        case .failed(let failure):
            engine.runState.summary.failed += 1
            engine.operators.metrics.metrics.itemEnded(outcome: "failed", code: failure.code,
                                                       seconds: seconds)
        default: break
        }
        engine.hooks.itemEnded(record)
        engine.driver.contentStore?.itemEnded(record.key)
        // The group end first: when this item ends it, its marker takes the URL from the
        // description the item still holds instead of reading the request file again.
        engine.groupEnds.executor.send(.itemEnded, to: request, now: Date())
        record.shed()
    }
}

/// The jitter of the engine's item contexts: SplitMix64, seeded once from the system
/// generator. A back-off jitter needs spread, not secrecy, and every item event asks for one;
/// the system generator costs a `getrandom` call each time. Engine thread only.
struct JitterSource {
    private var state = UInt64.random(in: 0 ... .max)

    /// The next number in 0..<1.
    mutating func next() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(UInt64(1) << 53)
    }
}
