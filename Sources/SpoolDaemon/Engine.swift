import Foundation
import Synchronization
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer
import SpoolWatcher

/// How a run ended.
public struct RunSummary: Sendable, Hashable {
    public var published = 0
    public var failed = 0
    public var rejected = 0
    /// 0: every item published; 1: an item failed or a request was rejected.
    public var exitCode: Int32 { failed > 0 || rejected > 0 ? 1 : 0 }
}

/// The daemon: one engine thread that owns the transfer session, the scheduler and every
/// in-memory record, and sleeps in `curl_multi_poll` until a socket, a timer or the inbox needs it.
///
/// Other threads — the watcher, the I/O queue (publishing, group ends, rejections), the hook
/// runner and signal handlers — never touch the engine's state; they post to the inbox.
public final class Engine {
    private let configuration: DaemonConfiguration
    private let logger: Logger
    private let layout: SpoolLayout
    private let store: SpoolStore
    private let publisher: Publisher
    private var scheduler: Scheduler
    private let backoff: Backoff
    private let hooks: HookRunner
    private let wakeTarget = WakeTarget()
    private let inbox: Inbox
    private let ioQueue = DispatchQueue(label: "spoolfetch-io")
    private var session: TransferSession!

    private var requests: [String: RequestRecord] = [:]
    private var items: [Int: ItemRecord] = [:]
    /// Staging base → item key, to match the publisher's results.
    private var itemsByBase: [String: Int] = [:]
    private var nextKey = 0
    private var publishQueue: [PublishJob] = []
    private var publishInFlight = false
    /// Jobs to try again after a failed publish (disk full, I/O error), with their time.
    private var publishRetries: [(at: Date, job: PublishJob)] = []
    /// I/O-thread jobs whose result has not come back.
    private var ioOutstanding = 0
    private var initialScanDone = false
    // Status reporting.
    private let startedAt = Date()
    private var statusDirty = true
    private var lastStatusWrite: Date?
    /// Items that ended recently, newest last (at most 100), for `spoolfetch status`.
    private var recentlyEnded: [TaskStatus] = []
    private let statusFileName = "\(ProcessInfo.processInfo.hostName)-\(getpid()).json"
    /// Group hooks started whose completion has not been reported.
    private var hooksOutstanding = 0
    /// Names seen in `incoming/` while `maxClaims` requests were held: claimed as others end.
    private var deferredNames: [String] = []
    private var deferredHead = 0
    private var deferredSet: Set<String> = []
    private var maxClaims = 0
    /// Items waiting for disk space, in arrival order, and when to look at the free space next.
    private var waitingForSpace: [ItemRecord] = []
    private var spaceCheckAt: Date?
    /// Keys of running transfers (for the space reservation).
    private var runningKeys: Set<Int> = []
    /// When to look for requests in `active/` whose worker died.
    private var nextAdoptionScan: Date?
    /// States from publish journals of an interrupted run, used to recover adopted requests;
    /// the journal files are removed once those requests have ended.
    private var journalStates: [String: ItemState] = [:]
    private var journalFiles: [String] = []
    /// Adopted requests whose group has not ended: the dead workers' journals go when none is left.
    private var adoptedOpen = 0
    /// Group ends to try again (an I/O error, a full disk), by request name: the request stays
    /// claimed meanwhile, so no other worker adopts and fetches it again.
    private var groupRetries: [(at: Date, request: String)] = []
    /// Whether the final folder is on the staging filesystem (its free space then counts once).
    private lazy var finalSharesStagingFilesystem = layout.final.deviceID() == layout.staging.deviceID()
    /// This worker's presence on the spool (see `WorkerRegistration`), held for the whole run.
    private var registration: WorkerRegistration?
    private var stopping = false
    private var summary = RunSummary()

    public init(configuration: DaemonConfiguration, logger: Logger) throws(DaemonError) {
        do { try configuration.validate() } catch { throw .configuration(error) }
        self.configuration = configuration
        self.logger = logger
        do {
            layout = try SpoolLayout(root: configuration.spool, finalFolder: configuration.finalFolder)
        } catch {
            throw .spool(error)
        }
        store = SpoolStore(layout: layout)
        publisher = Publisher(store: store)
        scheduler = Scheduler(configuration: SchedulerConfiguration(
            concurrency: configuration.concurrency, perHost: configuration.perHost,
            window: configuration.window.flatMap(DailyWindow.init(parsing:))))
        backoff = Backoff(base: configuration.retryBase, cap: configuration.retryCap)
        let target = wakeTarget
        inbox = Inbox(wake: { target.wake() })
        hooks = HookRunner(logger: logger)
    }

    /// Runs until drained (`once`) or until SIGTERM/SIGINT.
    public func run() throws(DaemonError) -> RunSummary {
        // The watcher first: libinotifytools waits in select(), which cannot watch fds ≥ 1024.
        let inbox = self.inbox
        let watcher = DirectoryWatcher(directory: layout.incoming.path, controlDirectory: layout.control.path) {
            inbox.post(.watcher($0))
        }
        do { try watcher.start() } catch { throw .watcher(error) }

        var transferConfiguration = TransferConfiguration()
        transferConfiguration.stallTimeout = configuration.stallTimeout
        transferConfiguration.caFile = configuration.caFile
        transferConfiguration.caPath = configuration.caPath
        if configuration.maxRate > 0 {
            // libcurl 7.88 checks the rate only between reads and reads up to 100 buffers at a
            // time, so a large buffer lets whole bodies through unthrottled: size it to the rate.
            transferConfiguration.bufferSize = Int(max(1024, min(Int64(transferConfiguration.bufferSize), configuration.maxRate / 400)))
        }
        do { session = try TransferSession(configuration: transferConfiguration) } catch { throw .transfer(error) }
        wakeTarget.set(session.waker)
        installSignalHandlers()
        maxClaims = FileLimit.raise(wanting: configuration.maxClaims, reserve: configuration.concurrency * 4 + 256,
                                    logger: logger)

        let registration: WorkerRegistration
        do { registration = try WorkerRegistration(layout: layout) } catch { throw .spool(error) }
        self.registration = registration
        // Alone, every temp file is a crash's leftover; beside live workers only old ones are.
        let swept = registration.alone ? store.sweepTemporaries() : store.sweepTemporaries(olderThan: 3600)
        if swept > 0 { logger.info("removed temporary files left by an earlier run", metadata: ["count": "\(swept)"]) }
        for pending in store.pendingGroupHooks() {
            logger.notice("running the group hook an earlier run did not get to", metadata: ["marker": "\(pending.markerPath)"])
            runGroupHook(journal: pending.journal, markerPath: pending.markerPath, group: pending.marker?.group ?? "",
                         request: pending.marker?.request ?? "", items: pending.marker?.items.count ?? 0,
                         failed: pending.marker?.failed ?? 0)
        }
        adoptOrphans(alone: registration.alone)
        do { try registration.share() } catch { throw .spool(error) }
        if configuration.adoptInterval > 0 { nextAdoptionScan = Date().addingTimeInterval(configuration.adoptInterval) }
        ServiceNotifier.notify("READY=1\nSTATUS=watching \(layout.incoming.path)")
        logger.info("spoolfetch running", metadata: [
            "spool": "\(layout.root)", "final": "\(layout.final.path)", "once": "\(configuration.once)",
            "concurrency": "\(configuration.concurrency)", "per-host": "\(configuration.perHost)"])

        while true {
            let messages = inbox.drain()
            for message in messages { handle(message) }
            let ended = session.perform()
            for started in session.takeBodyStarts() { bodyBegan(started.key, started.facts, started.restartedFromZero) }
            for outcome in ended { handle(outcome) }
            if !messages.isEmpty || !ended.isEmpty { statusDirty = true }
            schedule()
            if shouldExit() { break }
            session.wait(timeoutMilliseconds: sleepMilliseconds())
        }
        hooks.waitForAll()
        layout.status.remove(statusFileName)
        store.releaseWorkerFolder()     // its folder in active/ goes when empty; the rest is adopted later
        logger.info("spoolfetch stopped", metadata: [
            "published": "\(summary.published)", "failed": "\(summary.failed)", "rejected": "\(summary.rejected)"])
        return summary
    }

    // MARK: Loop helpers

    private func shouldExit() -> Bool {
        if stopping {
            return ioOutstanding == 0 && !publishInFlight && hooksOutstanding == 0
        }
        guard configuration.once, initialScanDone else { return false }
        return hooksOutstanding == 0 && requests.isEmpty && deferredHead == deferredNames.count && ioOutstanding == 0 && !publishInFlight && publishQueue.isEmpty
    }

    /// Until the nearest timer (earliest start, retry, window, publish retry); "forever" when none.
    private func sleepMilliseconds() -> Int32 {
        let now = Date()
        var next = scheduler.nextWakeup(now: now)
        for t in [publishRetries.map(\.at).min(), groupRetries.map(\.at).min(), spaceCheckAt, nextAdoptionScan,
                  nextStatusWrite()].compactMap({ $0 }) {
            next = min(next ?? t, t)
        }
        guard let next else { return Int32.max }
        let ms = (next.timeIntervalSince(now) * 1000).rounded(.up)
        return Int32(max(0, min(ms, Double(Int32.max))))
    }

    private func schedule() {
        let now = Date()
        if !publishRetries.isEmpty {
            let due = publishRetries.filter { $0.at <= now }
            publishRetries.removeAll { $0.at <= now }
            publishQueue.append(contentsOf: due.map(\.job))
        }
        kickPublisher()
        if !groupRetries.isEmpty {
            let due = groupRetries.filter { $0.at <= now }
            groupRetries.removeAll { $0.at <= now }
            for retry in due { if let request = requests[retry.request] { endGroup(request) } }
        }
        if stopping { return }
        if let at = spaceCheckAt, at <= now { releaseSpaceWaiters(now: now) }
        if let at = nextAdoptionScan, at <= now {
            nextAdoptionScan = now.addingTimeInterval(configuration.adoptInterval)
            adoptOrphans(alone: false)
        }
        let actions = scheduler.nextActions(now: now)
        for action in actions {
            switch action {
            case .start(let key): start(key)
            case .pause(let key): pause(key)
            }
        }
        if !actions.isEmpty { statusDirty = true }
        if let due = nextStatusWrite(), due <= now { writeStatus(now: now) }
    }

    // MARK: Messages

    private func handle(_ message: EngineMessage) {
        switch message {
        case .watcher(.arrived(let name)):
            claimIncoming(name)
        case .watcher(.listing(let names, let initial)):
            if !initial { logger.warning("inotify queue overflowed; rescanned incoming/", metadata: ["files": "\(names.count)"]) }
            for name in names { claimIncoming(name) }
            if initial { initialScanDone = true }
        case .watcher(.control(let name)):
            handleControl(name)
        case .watcher(.failed(let reason)):
            logger.critical("watcher stopped: \(reason)")
            beginStop(reason: "watcher failed")
        case .published(let results):
            publishInFlight = false
            ioOutstanding -= 1
            attachJournals(results)
            for result in results { handlePublished(result) }
        case .groupEnded(let request, let markerPath, let journal, let error):
            ioOutstanding -= 1
            groupEnded(request, markerPath: markerPath, journal: journal, error: error)
        case .rejected(let request, let error):
            ioOutstanding -= 1
            if let error { logger.error("could not file a rejected request: \(error)", metadata: ["request": "\(request)"]) }
        case .groupHookFinished(let journal):
            hooksOutstanding -= 1
            store.groupHookDone(journal)
        case .stop(let signal):
            beginStop(reason: signal == SIGINT ? "SIGINT" : "SIGTERM")
        }
    }

    private func beginStop(reason: String) {
        guard !stopping else { return }
        stopping = true
        logger.notice("stopping: no new claims; partial downloads are kept", metadata: ["reason": "\(reason)"])
        ServiceNotifier.notify("STOPPING=1")
        for (key, record) in items {
            guard case .running = record.phase else { continue }
            if let outcome = session.remove(key) { keepPartial(record, outcome) }
            runningKeys.remove(key)
            saveResumeState(record)
        }
    }

    // MARK: Claiming and parsing

    /// Takes over the requests in `active/` whose worker is gone. Their publish journals are
    /// read after the claims: a worker that died before the scan has released every lock it
    /// held, so all of its journals are readable by then.
    private func adoptOrphans(alone: Bool) {
        let claims = store.adoptOrphans()
        if !claims.isEmpty || alone {
            let (states, files) = store.readJournals()
            journalStates.merge(states) { _, new in new }
            for file in files where !journalFiles.contains(file) { journalFiles.append(file) }
        }
        for claim in claims {
            logger.notice("adopting a request whose worker is gone", metadata: ["request": "\(claim.name)"])
            accept(claim, adopted: true)
        }
        forgetDeadJournalsIfSpent()
    }

    /// Once every adopted request has ended, the dead workers' journals have told all they can.
    private func forgetDeadJournalsIfSpent() {
        guard adoptedOpen == 0, !journalFiles.isEmpty else { return }
        for file in journalFiles { store.layout.staging.remove(file) }
        journalFiles = []
        journalStates = [:]
    }

    /// Ties each batch journal to the requests whose items it records; it is removed when the
    /// last of them has ended its group (`releaseJournals`).
    private func attachJournals(_ results: [PublishResult]) {
        var batch: [ObjectIdentifier: BatchJournal] = [:]
        for result in results {
            guard let lock = result.journal else { continue }
            let journal = batch[ObjectIdentifier(lock)] ?? BatchJournal(lock: lock)
            batch[ObjectIdentifier(lock)] = journal
            guard let request = record(forBase: result.base)?.request,
                  !request.journals.contains(where: { $0 === journal }) else { continue }
            request.journals.append(journal)
            journal.openRequests += 1
        }
        for journal in batch.values where journal.openRequests == 0 { store.layout.staging.remove(journal.lock.name) }
    }

    private func releaseJournals(of request: RequestRecord) {
        for journal in request.journals {
            journal.openRequests -= 1
            if journal.openRequests == 0 { store.layout.staging.remove(journal.lock.name) }
        }
        request.journals = []
    }

    private func claimIncoming(_ name: String) {
        guard !stopping, DirectoryWatcher.isCandidate(name) else { return }
        if requests.count >= maxClaims {
            // Each claim holds a descriptor (its lock); beyond the limit the request stays
            // queued in incoming/ and is claimed when an earlier one ends.
            if deferredSet.insert(name).inserted { deferredNames.append(name) }
            return
        }
        do {
            switch try store.claim(name) {
            case .gone:
                return
            case .refused(let code, let message):
                summary.rejected += 1
                logger.warning("rejected a request file: \(message)", metadata: ["request": "\(name)", "code": "\(code)"])
                let record = ErrorRecord(request: name, code: code, message: message)
                submitIO { [store] in
                    do throws(StoreError) { try store.rejectUnclaimed(name, record); return .rejected(request: name, error: nil) }
                    catch { return .rejected(request: name, error: error) }
                }
            case .claimed(let claim):
                accept(claim, adopted: false)
            }
        } catch {
            logger.error("could not claim a request file: \(error)", metadata: ["request": "\(name)"])
        }
    }

    private func claimDeferred() {
        while requests.count < maxClaims && deferredHead < deferredNames.count && !stopping {
            let name = deferredNames[deferredHead]
            deferredHead += 1
            deferredSet.remove(name)
            claimIncoming(name)
        }
        if deferredHead == deferredNames.count || deferredHead > 4096 {
            deferredNames.removeFirst(deferredHead)
            deferredHead = 0
        }
    }

    private func accept(_ claim: ClaimedRequest, adopted: Bool) {
        let file: RequestFile
        do {
            file = try RequestParser.parse(fileName: claim.name, bytes: claim.bytes,
                                           limits: ParseLimits(maxBytes: store.maxRequestBytes,
                                                               maxItems: configuration.maxItems))
        } catch {
            summary.rejected += 1
            logger.warning("rejected a request file: \(error.description)", metadata: ["request": "\(claim.name)"])
            let record = ErrorRecord(request: claim.name, code: error.rule, message: error.message, line: error.line)
            submitIO { [store] in
                do throws(StoreError) { try store.reject(claim, record); return .rejected(request: claim.name, error: nil) }
                catch { return .rejected(request: claim.name, error: error) }
            }
            return
        }
        let request = RequestRecord(claim: claim, file: file)
        requests[claim.name] = request
        if adopted {
            request.adopted = true
            adoptedOpen += 1
        }
        let now = Date()
        for item in file.items {
            nextKey += 1
            let record = ItemRecord(key: nextKey, request: request, item: item, now: now)
            request.items.append(record)
            items[record.key] = record
            itemsByBase[record.base] = record.key
        }
        // Every item is counted before any is recovered: a recovered item may end at once, and
        // the group must not end before its later items are even known.
        request.open = request.items.count
        for record in request.items {
            if adopted { recover(record) } else { enqueue(record) }
        }
        logger.debug("claimed a request", metadata: ["request": "\(claim.name)", "items": "\(file.items.count)",
                                                     "group": "\(file.group)"])
        if request.open == 0 { endGroup(request) }
    }

    private func enqueue(_ record: ItemRecord) {
        record.phase = .queued
        scheduler.submit(ScheduledItem(key: record.key, hostKey: record.item.url.hostKey,
                                       priority: SchedulingPriority(record.item.priority),
                                       earliestStart: record.item.earliestStart,
                                       discretionary: record.item.discretionary))
    }

    /// An adopted request's item: pick up where the dead worker left it (state table in README).
    private func recover(_ record: ItemRecord) {
        guard let state = store.readState(record.base) ?? journalStates[record.base], state.request == record.request.name,
              state.index == record.item.index else {
            store.removeStaging(record.base)
            enqueue(record)
            return
        }
        record.attempts = state.attempts
        record.hasStateFile = true
        switch state.phase {
        case .failed:
            if let failure = state.failure { itemEnded(record, .failed(failure)) } else { enqueue(record) }
        case .published, .ready:
            guard let marker = state.marker else { enqueue(record); return }
            if let inode = state.inode, let file = state.finalName ?? store.findPublished(name: marker.name, inode: inode),
               !store.partExists(record.base) {
                // The data was renamed; its marker may or may not have been written.
                if store.layout.final.exists(file + ".done") {
                    itemEnded(record, .published(file: file, marker: store.layout.final.path(of: file + ".done")))
                } else if let part = try? store.openPartIfPresent(record.base) ?? store.openPart(record.base, fresh: true) {
                    record.phase = .publishing
                    publishQueue.append(PublishJob(part: part, state: state, marker: marker, alreadyPublishedAs: file))
                } else {
                    enqueue(record)
                }
            } else if store.partExists(record.base), let part = try? store.openPart(record.base, fresh: false),
                      part.size == marker.bytes {
                record.part = part
                record.phase = .publishing
                publishQueue.append(PublishJob(part: part, state: state, marker: marker))
            } else {
                store.removeStaging(record.base)
                enqueue(record)
            }
        case .running:
            // Resume from the partial when its validators allow it.
            if state.etag != nil || state.lastModified != nil,
               let part = try? store.openPart(record.base, fresh: false), part.size > 0 {
                record.part = part
                record.etag = state.etag
                record.lastModified = state.lastModified
                record.bytesOnDisk = part.size
                record.hash = nil     // re-hashed before the transfer starts
            } else {
                store.removeStaging(record.base)
            }
            enqueue(record)
        }
    }

    // MARK: Transfers

    private func start(_ key: Int) {
        guard let record = items[key] else { scheduler.finished(key); return }
        if !hasSpace(for: record) {
            scheduler.finished(key)
            waitForSpace(record, reason: "not enough free space for its expected size")
            return
        }
        record.attempts += 1
        if record.startedAt == nil { record.startedAt = Date() }
        do {
            if record.part == nil {
                record.part = try store.openPart(record.base, fresh: true)
                record.bytesOnDisk = 0
                record.hash = nil
            }
            let part = record.part!
            var resumeFrom: Int64 = 0
            if record.bytesOnDisk > 0, record.validator != nil {
                if record.hash == nil { record.hash = try HashState.of(fd: part.fd, length: record.bytesOnDisk) }
                resumeFrom = record.bytesOnDisk
            } else if record.bytesOnDisk > 0 || part.size > 0 {
                try part.truncate(to: 0)
                record.bytesOnDisk = 0
                record.hash = nil
            }
            let request = TransferRequest(
                url: record.item.url.string, headers: record.item.headers.map(\.line), destination: part.fd,
                resumeFrom: resumeFrom, prefixHash: resumeFrom > 0 ? record.hash : nil,
                ifRange: resumeFrom > 0 ? record.validator : nil, maxBytes: sizeLimit(record.item))
            try session.start(key: key, request: request, maxRecvSpeed: perTransferRate(adding: 1))
            record.phase = .running
            runningKeys.insert(key)
            rebalanceRate()
            logger.debug("transfer started", metadata: ["item": "\(record.id)", "url": "\(record.item.url)",
                                                        "attempt": "\(record.attempts)", "resume-from": "\(resumeFrom)"])
        } catch let error as StoreError where error.isDiskFull {
            record.attempts -= 1
            scheduler.finished(key)
            waitForSpace(record, reason: "\(error)")
        } catch {
            scheduler.finished(key)
            fail(record, code: "staging", message: "could not prepare the staging file: \(error)")
        }
    }

    /// The size limit of an item: its `max-bytes`, else `expected-bytes` × slack; never above
    /// the daemon-wide `--max-bytes`.
    private func sizeLimit(_ item: RequestItem) -> Int64? {
        var limit: Int64? = item.maxBytes
        if limit == nil, let expected = item.expectedBytes {
            let scaled = Double(expected) * configuration.expectSlack
            limit = scaled >= Double(Int64.max) ? nil : max(Int64(scaled), expected)
        }
        if configuration.maxBytes > 0 { limit = min(limit ?? configuration.maxBytes, configuration.maxBytes) }
        return limit
    }

    private func perTransferRate(adding extra: Int = 0) -> Int64 {
        guard configuration.maxRate > 0 else { return 0 }
        return max(1, configuration.maxRate / Int64(max(1, session.runningCount + extra)))
    }

    /// `--max-rate` is shared evenly among the running transfers.
    private func rebalanceRate() {
        guard configuration.maxRate > 0 else { return }
        let share = perTransferRate()
        for (key, record) in items { if case .running = record.phase { session.setMaxRecvSpeed(key, share) } }
    }

    private func pause(_ key: Int) {
        guard let record = items[key], let outcome = session.remove(key) else { return }
        runningKeys.remove(key)
        keepPartial(record, outcome)
        saveResumeState(record)
        record.phase = .queued
        rebalanceRate()
        logger.info("transfer paused; partial kept", metadata: ["item": "\(record.id)", "bytes": "\(record.bytesOnDisk)"])
    }

    /// Remembers the resume validators as soon as a large body starts, so that even a `kill -9`
    /// leaves a partial the next run can resume with `Range` + `If-Range`.
    private func bodyBegan(_ key: Int, _ facts: ResponseFacts, _ restartedFromZero: Bool) {
        guard let record = items[key] else { return }
        if restartedFromZero {
            record.bytesOnDisk = 0
            logger.info("server sent the whole body again; starting over", metadata: ["item": "\(record.id)"])
        }
        record.etag = facts.etag
        record.lastModified = facts.lastModified
        let total = facts.rangeTotal ?? facts.contentLength ?? record.item.expectedBytes ?? Int64.max
        guard total >= Self.resumeStateThreshold, record.validator != nil, let part = record.part else { return }
        let state = ItemState(request: record.request.name, index: record.item.index, url: record.item.url.string,
                              phase: .running, inode: part.inode, etag: record.etag, lastModified: record.lastModified,
                              bytes: 0, attempts: record.attempts, startedAt: record.startedAt.map(RFC3339.format))
        try? store.writeState(record.base, state)
        record.hasStateFile = true
    }

    /// Bodies smaller than this are simply fetched again after a crash.
    static let resumeStateThreshold: Int64 = 1 << 20

    // MARK: Disk space

    /// Whether the staging (and, if separate, the final) filesystem can take the rest of the
    /// item's expected size on top of what the running transfers still expect, keeping `--min-free`.
    private func hasSpace(for record: ItemRecord) -> Bool {
        let needed = max(0, (record.item.expectedBytes ?? 0) - record.bytesOnDisk)
        var reserved: Int64 = 0
        for key in runningKeys {
            guard let r = items[key], let expected = r.item.expectedBytes else { continue }
            reserved += max(0, expected - r.bytesOnDisk)
        }
        let layout = store.layout
        var folders = [layout.staging]
        if !finalSharesStagingFilesystem { folders.append(layout.final) }
        for folder in folders {
            guard let free = folder.freeBytes() else { continue }
            if free - configuration.minFree - reserved < needed { return false }
        }
        return true
    }

    private func waitForSpace(_ record: ItemRecord, reason: String) {
        record.phase = .waitingForSpace
        waitingForSpace.append(record)
        if spaceCheckAt == nil { spaceCheckAt = Date().addingTimeInterval(Self.spaceCheckInterval) }
        logger.warning("waiting for disk space; the partial is kept", metadata: [
            "item": "\(record.id)", "bytes": "\(record.bytesOnDisk)", "reason": "\(reason)",
            "free": "\(store.layout.staging.freeBytes() ?? -1)", "min-free": "\(configuration.minFree)"])
    }

    /// How often free space is looked at while an item waits for it (statvfs on a timer; only
    /// while something waits).
    static let spaceCheckInterval: Double = 2

    private func releaseSpaceWaiters(now: Date) {
        spaceCheckAt = nil
        var still: [ItemRecord] = []
        for record in waitingForSpace {
            if still.isEmpty && hasSpace(for: record) && (store.layout.staging.freeBytes() ?? 0) > configuration.minFree {
                logger.info("disk space is back; resuming", metadata: ["item": "\(record.id)"])
                enqueue(record)
            } else {
                still.append(record)
            }
        }
        waitingForSpace = still
        if !still.isEmpty { spaceCheckAt = now.addingTimeInterval(Self.spaceCheckInterval) }
    }

    private func keepPartial(_ record: ItemRecord, _ outcome: TransferOutcome) {
        record.bytesOnDisk = outcome.bytesOnDisk
        record.hash = outcome.hashState
        if outcome.facts.etag != nil || outcome.facts.lastModified != nil {
            record.etag = outcome.facts.etag
            record.lastModified = outcome.facts.lastModified
        }
    }

    private func saveResumeState(_ record: ItemRecord) {
        guard record.bytesOnDisk > 0, record.validator != nil, let part = record.part else { return }
        let state = ItemState(request: record.request.name, index: record.item.index, url: record.item.url.string,
                              phase: .running, inode: part.inode, etag: record.etag,
                              lastModified: record.lastModified, bytes: record.bytesOnDisk,
                              attempts: record.attempts, startedAt: record.startedAt.map(RFC3339.format))
        try? store.writeState(record.base, state)
        record.hasStateFile = true
    }

    private func handle(_ outcome: TransferOutcome) {
        guard let record = items[outcome.key] else { return }
        runningKeys.remove(outcome.key)
        keepPartial(record, outcome)
        record.lastFacts = outcome.facts
        rebalanceRate()
        if outcome.failure == nil, let digest = outcome.sha256 {
            scheduler.finished(record.key)
            ready(record, outcome, digest: digest)
            return
        }
        let failure = outcome.failure ?? .curl(code: -1, text: "no result")
        record.lastFailure = failure

        // A 416 to a resume: either the partial already is the whole file, or start over.
        if case .httpStatus(416) = failure, record.bytesOnDisk > 0 {
            if outcome.facts.rangeTotal == record.bytesOnDisk, let hash = record.hash {
                scheduler.finished(record.key)
                ready(record, outcome, digest: hash.hexDigest)
            } else {
                record.bytesOnDisk = 0
                record.hash = nil
                record.etag = nil
                record.lastModified = nil
                scheduler.retry(record.key, notBefore: Date())
                record.phase = .retrying
            }
            return
        }
        if case .write(let e) = failure, e == ENOSPC || e == EDQUOT {
            // A full disk is not the item's fault: keep the partial, wait for space, and do not
            // count the attempt.
            record.attempts -= 1
            scheduler.finished(record.key)
            saveResumeState(record)
            waitForSpace(record, reason: "\(failure)")
            return
        }
        if case .rangeMismatch = failure {
            record.bytesOnDisk = 0     // start over on the next attempt
            record.hash = nil
        }

        let now = Date()
        let withinAttempts = configuration.maxAttempts == 0 || record.attempts < configuration.maxAttempts
        let withinDeadline = now.timeIntervalSince(record.firstQueued) < configuration.resourceTimeout
        if failure.isTransient && withinAttempts && withinDeadline && !stopping {
            let delay = backoff.delay(afterAttempt: record.attempts, jitter: Double.random(in: 0...1),
                                      retryAfter: outcome.facts.retryAfter)
            if case .httpStatus(let status) = failure, status == 429 || status == 503 {
                // The server asked for a pause: back off the whole host, not just this item.
                scheduler.holdHost(record.item.url.hostKey, until: now.addingTimeInterval(delay))
            }
            scheduler.retry(record.key, notBefore: now.addingTimeInterval(delay))
            record.phase = .retrying
            saveResumeState(record)
            logger.info("transfer failed; will retry", metadata: [
                "item": "\(record.id)", "url": "\(record.item.url)", "error": "\(failure)",
                "attempt": "\(record.attempts)", "retry-in": "\(String(format: "%.1f", delay))s"])
            return
        }
        scheduler.finished(record.key)
        if stopping, failure.isTransient || failure == .cancelled {
            saveResumeState(record)      // picked up by the next run
            return
        }
        var message = "\(failure)"
        if failure.isTransient && !withinAttempts { message += " (gave up after \(record.attempts) attempts)" }
        if failure.isTransient && !withinDeadline { message += " (resource timeout reached)" }
        if case .tooLarge = failure, record.item.maxBytes == nil, record.item.expectedBytes != nil {
            message += " (expected-bytes × \(configuration.expectSlack); set max-bytes to allow more)"
        }
        fail(record, code: failure.code, message: message)
    }

    /// The body is complete: check it, then hand it to the publisher.
    private func ready(_ record: ItemRecord, _ outcome: TransferOutcome, digest: String) {
        if let wanted = record.item.sha256, wanted != digest {
            fail(record, code: "sha256-mismatch", message: "sha256 of the body is \(digest), the request expects \(wanted)")
            return
        }
        guard let part = record.part else { return }
        let finished = Date()
        let facts = outcome.facts
        let marker = ItemMarker(
            request: record.request.name, group: record.request.group, index: record.item.index,
            url: record.item.url.string, finalURL: facts.finalURL, name: record.item.name,
            bytes: record.bytesOnDisk, sha256: digest, httpStatus: facts.httpStatus == 206 ? 206 : facts.httpStatus,
            etag: facts.etag ?? record.etag, lastModified: facts.lastModified ?? record.lastModified,
            contentType: facts.contentType, startedAt: RFC3339.format(record.startedAt ?? finished),
            finishedAt: RFC3339.format(finished), attempts: record.attempts)
        let state = ItemState(request: record.request.name, index: record.item.index, url: record.item.url.string,
                              phase: .ready, inode: part.inode, etag: marker.etag, lastModified: marker.lastModified,
                              bytes: record.bytesOnDisk, attempts: record.attempts, startedAt: marker.startedAt,
                              marker: marker)
        record.phase = .publishing
        publishQueue.append(PublishJob(part: part, state: state, marker: marker))
    }

    // MARK: Publishing

    private func kickPublisher() {
        guard !publishInFlight, !publishQueue.isEmpty else { return }
        let jobs = publishQueue
        publishQueue.removeAll(keepingCapacity: true)
        publishInFlight = true
        let publisher = self.publisher
        submitIO { .published(publisher.publish(jobs)) }
    }

    private func handlePublished(_ result: PublishResult) {
        guard let record = record(forBase: result.base) else { return }
        if let markerPath = result.markerPath, let file = result.finalName {
            record.part = nil
            itemEnded(record, .published(file: file, marker: markerPath))
            return
        }
        let error = result.error.map { "\($0)" } ?? "unknown error"
        if result.finalName == nil && !store.partExists(record.base) {
            fail(record, code: "publish", message: "publishing failed and the staged file is gone: \(error)")
            return
        }
        logger.warning("publishing failed; will try again in 5 s", metadata: ["item": "\(record.id)", "error": "\(error)"])
        var job = result.job
        job.alreadyPublishedAs = result.finalName
        publishRetries.append((Date().addingTimeInterval(5), job))
    }

    private func record(forBase base: String) -> ItemRecord? {
        itemsByBase[base].flatMap { items[$0] }
    }

    // MARK: Endings

    private func fail(_ record: ItemRecord, code: String, message: String) {
        var curlCode: Int? = nil, curlText: String? = nil
        if case .curl(let c, let t) = record.lastFailure { curlCode = c; curlText = t }
        let status = record.lastFacts?.httpStatus
        let failure = ItemFailure(index: record.item.index, url: record.item.url.string, name: record.item.name,
                                  code: code, message: message, attempts: record.attempts,
                                  httpStatus: status == 0 ? nil : status, curlCode: curlCode, curlError: curlText)
        record.part = nil
        store.layout.staging.remove(record.base + ".part")
        let state = ItemState(request: record.request.name, index: record.item.index, url: record.item.url.string,
                              phase: .failed, attempts: record.attempts, failure: failure)
        try? store.writeState(record.base, state)
        record.hasStateFile = true
        logger.warning("item failed: \(message)", metadata: ["item": "\(record.id)", "url": "\(record.item.url)",
                                                             "code": "\(code)"])
        itemEnded(record, .failed(failure))
    }

    private func itemEnded(_ record: ItemRecord, _ phase: ItemPhase) {
        guard !record.phase.hasEnded else { return }
        record.phase = phase
        recentlyEnded.append(taskStatus(record, now: Date()))
        if recentlyEnded.count > 100 { recentlyEnded.removeFirst(recentlyEnded.count - 100) }
        statusDirty = true
        let request = record.request
        request.open -= 1
        switch phase {
        case .published(let file, let marker):
            summary.published += 1
            logger.debug("published", metadata: ["item": "\(record.id)", "file": "\(file)"])
            runItemHook(record, status: "published", path: store.layout.final.path(of: file), marker: marker, reason: nil)
        case .failed(let failure):
            summary.failed += 1
            runItemHook(record, status: "failed", path: nil, marker: nil, reason: "\(failure.code): \(failure.message)")
        default: break
        }
        if request.open == 0 { endGroup(request) }
    }

    private func endGroup(_ request: RequestRecord) {
        guard !request.ending else { return }
        request.ending = true
        var groupItems: [GroupItem] = []
        var failures: [ItemFailure] = []
        for record in request.items {
            switch record.phase {
            case .published(let file, let marker):
                groupItems.append(GroupItem(index: record.item.index, url: record.item.url.string, outcome: "published",
                                            file: file, marker: (marker as NSString).lastPathComponent))
            case .failed(let failure):
                failures.append(failure)
                groupItems.append(GroupItem(index: record.item.index, url: record.item.url.string, outcome: "failed",
                                            code: failure.code, message: failure.message))
            default: break
            }
        }
        let marker = GroupMarker(group: request.group, request: request.name, finishedAt: RFC3339.format(Date()),
                                 items: groupItems)
        let errorRecord = failures.isEmpty ? nil : ErrorRecord(
            request: request.name, code: "items-failed",
            message: "\(failures.count) of \(request.items.count) items failed"
                + (failures.count < request.items.count ? "; the others were published" : ""), items: failures)
        let claim = request.claim
        let bases = request.items.filter(\.hasStateFile).map(\.base)
        let store = self.store
        submitIO {
            do throws(StoreError) {
                let (path, journal) = try store.endGroup(claim, marker: marker, failure: errorRecord)
                for base in bases { store.removeStaging(base) }
                return .groupEnded(request: claim.name, markerPath: path, journal: journal, error: nil)
            } catch {
                return .groupEnded(request: claim.name, markerPath: nil, journal: nil, error: error)
            }
        }
    }

    private func groupEnded(_ name: String, markerPath: String?, journal: HeldLock?, error: StoreError?) {
        guard let request = requests[name] else { return }
        if let error {
            // Keep the claim: letting go would leave the request unlocked in active/, where a
            // worker would adopt it and fetch everything again.
            logger.error("could not end the group; will try again in 5 s: \(error)",
                         metadata: ["request": "\(name)", "group": "\(request.group)"])
            request.ending = false
            groupRetries.append((Date().addingTimeInterval(5), name))
            return
        }
        requests.removeValue(forKey: name)
        releaseJournals(of: request)
        if request.adopted {
            adoptedOpen -= 1
            forgetDeadJournalsIfSpent()
        }
        claimDeferred()
        for record in request.items {
            items.removeValue(forKey: record.key)
            itemsByBase.removeValue(forKey: record.base)
        }
        let failed = request.items.filter { if case .failed = $0.phase { return true } else { return false } }.count
        logger.info("group ended", metadata: ["request": "\(name)", "group": "\(request.group)",
                                              "items": "\(request.items.count)", "failed": "\(failed)"])
        guard let markerPath, let journal else { return }
        runGroupHook(journal: journal, markerPath: markerPath, group: request.group, request: name,
                     items: request.items.count, failed: failed)
    }

    /// Runs `--on-group` for an ended group, then drops its journal — so the hook runs once, and
    /// still runs after a crash that came between the group marker and the hook.
    private func runGroupHook(journal: HeldLock, markerPath: String, group: String, request: String, items: Int, failed: Int) {
        guard let command = configuration.onGroup else {
            store.groupHookDone(journal)
            return
        }
        let inbox = self.inbox
        hooks.run(command, environment: [
            "SPOOLFETCH_GROUP": group, "SPOOLFETCH_ID": request, "SPOOLFETCH_MARKER": markerPath,
            "SPOOLFETCH_PATH": markerPath,
            "SPOOLFETCH_STATUS": failed == 0 ? "published" : "failed",
            "SPOOLFETCH_ITEMS": "\(items)", "SPOOLFETCH_FAILED": "\(failed)",
        ]) { inbox.post(.groupHookFinished(journal: journal)) }
        hooksOutstanding += 1
    }

    private func runItemHook(_ record: ItemRecord, status: String, path: String?, marker: String?, reason: String?) {
        guard let command = configuration.onItem else { return }
        var environment = [
            "SPOOLFETCH_ID": record.id, "SPOOLFETCH_GROUP": record.request.group,
            "SPOOLFETCH_URL": record.item.url.string, "SPOOLFETCH_STATUS": status,
            "SPOOLFETCH_BYTES": "\(record.bytesOnDisk)",
        ]
        if let finalURL = record.lastFacts?.finalURL { environment["SPOOLFETCH_FINAL_URL"] = finalURL }
        if let path { environment["SPOOLFETCH_PATH"] = path }
        if let marker { environment["SPOOLFETCH_MARKER"] = marker }
        if let reason { environment["SPOOLFETCH_REASON"] = reason }
        if status == "published", let hash = record.hash { environment["SPOOLFETCH_SHA256"] = hash.hexDigest }
        hooks.run(command, environment: environment)
    }

    // MARK: Status

    /// While transfers run: once a second. Otherwise once after a change, then never (idle
    /// means asleep).
    private func nextStatusWrite() -> Date? {
        guard statusDirty || !runningKeys.isEmpty else { return nil }
        guard let last = lastStatusWrite else { return .distantPast }
        return last.addingTimeInterval(1)
    }

    private func writeStatus(now: Date) {
        var tasks: [TaskStatus] = []
        var pendingShown = 0, morePending = 0
        for request in requests.values.sorted(by: { $0.name < $1.name }) {
            for record in request.items where !record.phase.hasEnded {
                let task = taskStatus(record, now: now)
                if task.state == "pending" || task.state.hasPrefix("waiting-start") {
                    if pendingShown >= StatusReport.pendingShown { morePending += 1; continue }
                    pendingShown += 1
                }
                tasks.append(task)
            }
        }
        tasks += recentlyEnded
        let daemon = DaemonStatus(
            host: ProcessInfo.processInfo.hostName, pid: getpid(), version: Daemon.version, spool: layout.root,
            startedAt: RFC3339.format(startedAt), updatedAt: RFC3339.format(now), running: runningKeys.count,
            queued: scheduler.queuedCount + deferredNames.count - deferredHead, published: summary.published,
            failed: summary.failed, rejected: summary.rejected)
        let report = StatusReport(daemon: daemon, tasks: tasks, morePending: morePending)
        try? layout.status.writeAtomically(statusFileName, SpoolJSON.encode(report))
        lastStatusWrite = now
        statusDirty = false
    }

    private func taskStatus(_ record: ItemRecord, now: Date) -> TaskStatus {
        var state = record.phase.label
        var bytes = record.bytesOnDisk
        var expected = record.item.expectedBytes
        var rate: Double? = nil
        var eta: Double? = nil
        var startsAt: String? = nil
        var finishedAt: String? = nil
        var error: String? = record.lastFailure.map { "\($0)" }
        switch record.phase {
        case .queued:
            if let start = record.item.earliestStart, start > now {
                state = "waiting-start"
                startsAt = RFC3339.format(start)
            } else if record.item.discretionary, let window = scheduler.configuration.window, !window.contains(now, in: .current) {
                state = "waiting-window"
            }
        case .running:
            if let progress = session.progress(of: record.key) {
                bytes = progress.bytes
                expected = progress.total ?? expected
            }
            if let at = record.sampledAt, now.timeIntervalSince(at) > 0.2 {
                rate = Double(bytes - record.sampledBytes) / now.timeIntervalSince(at)
            }
            record.sampledAt = now
            record.sampledBytes = bytes
            if let rate, rate > 0, let expected, expected > bytes { eta = Double(expected - bytes) / rate }
        case .published:
            finishedAt = RFC3339.format(now)
            error = nil
        case .failed(let failure):
            finishedAt = RFC3339.format(now)
            error = "\(failure.code): \(failure.message)"
        default:
            break
        }
        return TaskStatus(id: record.id, request: record.request.name, group: record.request.group, name: record.item.name,
                          url: displayURL(record.item.url.string), state: state, bytes: bytes, expected: expected,
                          rate: rate, eta: eta, attempts: record.attempts, error: error, startsAt: startsAt,
                          finishedAt: finishedAt)
    }

    // MARK: Control

    /// `control/cmd-PID-…` (PID 0: any daemon): read, removed, acted on, answered in `res-…`.
    private func handleControl(_ name: String) {
        let parts = name.split(separator: "-", maxSplits: 2)
        guard parts.count == 3, parts[0] == "cmd", let target = Int32(parts[1]), target == 0 || target == getpid()
        else { return }
        let control = layout.control
        guard let bytes = try? control.read(name, limit: 4096) else { return }
        control.remove(name)
        let result: ControlResult
        if let command = SpoolJSON.decode(ControlCommand.self, bytes) {
            result = perform(command)
        } else {
            result = ControlResult(ok: false, message: "the command file is not a command", items: [])
        }
        logger.notice("control command", metadata: ["command": "\(name)", "ok": "\(result.ok)", "message": "\(result.message)"])
        try? control.writeAtomically("res-" + parts[1] + "-" + parts[2], SpoolJSON.encode(result))
        statusDirty = true
    }

    private func perform(_ command: ControlCommand) -> ControlResult {
        let (requestName, index): (String, Int?) = {
            if let hash = command.id.lastIndex(of: "#"), let i = Int(command.id[command.id.index(after: hash)...]) {
                return (String(command.id[..<hash]), i)
            }
            return (command.id, nil)
        }()
        guard let request = requests[requestName] else {
            return ControlResult(ok: false, message: "no task \(command.id) on this daemon (pid \(getpid())); see spoolfetch status", items: [])
        }
        let targets = request.items.filter { index == nil || $0.item.index == index }
        guard !targets.isEmpty else {
            return ControlResult(ok: false, message: "request \(requestName) has no item \(index ?? -1)", items: [])
        }
        var acted: [String] = []
        for record in targets where !record.phase.hasEnded {
            switch command.verb {
            case .cancel:
                stopTransfer(record)
                record.lastFailure = nil
                fail(record, code: "cancelled", message: "cancelled by the operator")
                acted.append(record.id)
            case .pause:
                guard !isPaused(record) else { continue }
                if case .publishing = record.phase { continue }
                stopTransfer(record)
                record.phase = .paused
                acted.append(record.id)
            case .resume:
                guard isPaused(record) else { continue }
                enqueue(record)
                acted.append(record.id)
            case .retry:
                guard case .retrying = record.phase else { continue }
                scheduler.remove(record.key)
                enqueue(record)
                acted.append(record.id)
            }
        }
        let verb = command.verb.rawValue
        if acted.isEmpty {
            return ControlResult(ok: false, message: "nothing to \(verb): \(command.id) is not in a state that allows it", items: [])
        }
        return ControlResult(ok: true, message: "\(verb): \(acted.count) item(s)", items: acted)
    }

    private func isPaused(_ record: ItemRecord) -> Bool {
        if case .paused = record.phase { return true }
        return false
    }

    /// Takes an item out of the transfer session, the scheduler and the space queue, keeping its partial.
    private func stopTransfer(_ record: ItemRecord) {
        if case .running = record.phase, let outcome = session.remove(record.key) {
            keepPartial(record, outcome)
            saveResumeState(record)
            runningKeys.remove(record.key)
            rebalanceRate()
        }
        scheduler.remove(record.key)
        waitingForSpace.removeAll { $0 === record }
    }

    // MARK: Threads

    private func submitIO(_ work: @escaping @Sendable () -> EngineMessage) {
        ioOutstanding += 1
        let inbox = self.inbox
        ioQueue.async { inbox.post(work()) }
    }

    private func installSignalHandlers() {
        let inbox = self.inbox
        StopSignals.install { inbox.post(.stop(signal: $0)) }
    }
}

/// The transfer session's waker, set once the session exists (the watcher starts first and may
/// post before that; such messages wait in the inbox for the first loop turn).
final class WakeTarget: Sendable {
    private let waker = Mutex<TransferWaker?>(nil)
    func set(_ w: TransferWaker) { waker.withLock { $0 = w } }
    func wake() { waker.withLock { $0 }?.wake() }
}

/// Why the daemon could not start.
public enum DaemonError: Error, CustomStringConvertible {
    case spool(StoreError)
    case watcher(WatcherError)
    case transfer(TransferSetupError)
    case configuration(ConfigurationError)

    public var description: String {
        switch self {
        case .spool(let e): return "cannot use the spool: \(e)"
        case .watcher(let e): return "cannot watch incoming/: \(e)"
        case .transfer(let e): return "cannot set up libcurl: \(e)"
        case .configuration(let e): return "bad configuration: \(e)"
        }
    }
}

extension SchedulingPriority {
    init(_ p: Priority) {
        switch p { case .low: self = .low; case .normal: self = .normal; case .high: self = .high }
    }
}

extension HashState {
    /// Re-hashes the kept prefix of a partial (after a restart, the running hash is gone).
    static func of(fd: Int32, length: Int64) throws(StoreError) -> HashState {
        var state = HashState()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < length {
            let want = Int(min(Int64(buffer.count), length - offset))
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, want, off_t(offset)) }
            if n < 0 { if errno == EINTR { continue }; throw StoreError("pread", "staging part") }
            if n == 0 { throw StoreError("pread", "staging part (shorter than its state says)", errno: EIO) }
            buffer.withUnsafeBytes { state.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += Int64(n)
        }
        return state
    }
}

/// The process's descriptor limit: every claim holds one (its `flock`), so raise the soft limit
/// to what is needed (up to the hard limit) and bound the claims by what is available.
enum FileLimit {
    static func raise(wanting claims: Int, reserve: Int, logger: Logger) -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return max(1, claims) }
        let wanted = rlim_t(claims + reserve)
        if limit.rlim_cur < wanted {
            var raised = limit
            raised.rlim_cur = min(wanted, limit.rlim_max)
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let available = Int(limit.rlim_cur) - reserve
        if available < claims {
            logger.warning("the file limit allows fewer claims than asked", metadata: [
                "max-claims": "\(claims)", "allowed": "\(max(1, available))", "RLIMIT_NOFILE": "\(limit.rlim_cur)"])
        }
        return max(1, min(claims, available))
    }
}
