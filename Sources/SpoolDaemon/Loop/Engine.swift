import Foundation
import SpoolCore
import SpoolConfiguration
import SpoolProcess
import Synchronization
import Logging
import SpoolMetrics
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer
import SpoolWatcher
import SpoolNetwork


/// The daemon: one engine thread that owns the transfer session, the scheduler and every
/// in-memory record, and sleeps in `curl_multi_poll` until a socket, a timer or the inbox needs
/// it. Each turn of the loop routes the messages that arrived, hands each item's events to its
/// lifecycle, has the rooms carry out the actions that come back (`Engine.send`), and sleeps
/// until the earliest deadline. docs/ARCHITECTURE.md draws the rooms and their threads.
///
/// Other threads — the watcher, the I/O queue (publishing, group ends, rejections), the hook
/// runner and the signal reader — never touch the engine's state; they post to the inbox.
public final class Engine {
    // What the daemon was started with, and how it writes things down.
    var configuration: DaemonConfiguration
    var logger: Logger
    /// How URLs are written down (without their query unless `keep-url-queries`).
    let urls: URLPrivacy
    let layout: SpoolLayout
    let store: SpoolStore

    // The loop: its inbox, the I/O queue that posts to it, and its timers' owners.
    let inbox: Inbox
    let wakeTarget = WakeTarget()
    let io: IOQueue
    var scheduler: Scheduler
    var policy: RetryPolicy
    var jitter = JitterSource()
    var stopping = false
    var summary = RunSummary()

    // Every claimed request and item (their phases live in the items' lifecycles).
    let table = ItemTable()
    /// The claimed file the last item start read, kept open for the next (see `RequestFileSlot`).
    let requestFile = RequestFileSlot()
    /// Publish-batch journals and what dead workers' journals say (see `JournalLedger`).
    let ledger: JournalLedger
    /// When requests' `deadline:` passes (see `RequestDeadlines`).
    let deadlines: RequestDeadlines

    // The rooms, each owning its state.
    let intake: Intake
    let driver: TransferDriver
    let space: SpaceGate
    let publishing: Publishing
    let groupEnds: GroupEnds
    let drain: Drain
    let hooks: HookDispatch

    // What operators see and say.
    let status: StatusReporter
    /// The Prometheus numbers and where they are written (see `MetricsWriter`).
    let metrics: MetricsWriter
    let control: ControlHandler

    // What the process holds while it runs.
    /// The watcher of `incoming/` and `control/`; nil once a drain has stopped it.
    var watcher: DirectoryWatcher?
    /// The last thing that went wrong with a watched folder, for status.
    var watcherTrouble: String?
    /// Reports network changes (rtnetlink); nil when it could not start.
    var networkMonitor: NetworkChangeMonitor?
    /// This worker's presence on the spool (see `WorkerRegistration`), held for the whole run.
    var registration: WorkerRegistration?
    /// How many items may hold a staging file open at once (see `DescriptorBudget`).
    let descriptors = DescriptorBudget.ofThisProcess()
    /// Gives the heap back once transfers stop (see `HeapPolicy`).
    var heap = HeapPolicy()
    /// The content store (`--store`), nil when off.
    let contentStore: ContentStoreRoom?

    public init(configuration: DaemonConfiguration, logger: Logger) throws(DaemonError) {
        do { try configuration.validate() } catch { throw .configuration(error) }
        if let netrc = configuration.netrcFile {
            do throws(PrivateFile.Refused) { _ = try PrivateFile.read(netrc) } catch {
                throw .configuration(ConfigurationError("--netrc-file: \(error)"))
            }
        }
        self.configuration = configuration
        self.logger = logger
        urls = URLPrivacy(keepsQueries: configuration.keepURLQueries)
        do {
            layout = try SpoolLayout(root: configuration.spool, finalFolder: configuration.finalFolder)
        } catch {
            throw .spool(error)
        }
        store = SpoolStore(layout: layout, maxRequestBytes: Int(clamping: configuration.maxRequestBytes))
        scheduler = Scheduler(configuration: SchedulerConfiguration(configuration))
        policy = RetryPolicy(configuration)
        let target = wakeTarget
        inbox = Inbox(wake: { target.wake() })
        io = IOQueue(inbox: inbox)
        if let problem = SpaceGate.impossibleMinFree(configuration.minFree, layout: layout) {
            throw .configuration(ConfigurationError(problem))
        }
        space = SpaceGate(layout: layout, minFree: configuration.minFree, logger: logger)
        ledger = JournalLedger(staging: layout.staging)
        deadlines = RequestDeadlines(byDefault: configuration.deadline.flatMap(RequestDeadline.init(parsing:)))
        intake = Intake(store: store, io: io, logger: logger, ledger: ledger, table: table, maxItems: configuration.maxItems,
                        maxRequestBytes: Int(clamping: configuration.maxRequestBytes))
        status = StatusReporter(directory: layout.status, spoolRoot: layout.root, logger: logger)
        let counts = DaemonMetrics(worker: status.workerName, version: Daemon.version, startedAt: Date())
        do {
            metrics = try MetricsWriter(metrics: counts, statusFolder: layout.status, statusName: status.workerName + ".prom",
                                        path: configuration.metricsFile, interval: configuration.metricsInterval, logger: logger)
        } catch {
            throw .configuration(ConfigurationError("--metrics-file: its folder cannot be opened: \(error)"))
        }
        hooks = HookDispatch(runner: HookRunner(logger: logger, timeout: configuration.hookTimeout,
                                                maxRunning: configuration.maxHooks, metrics: counts), store: store, inbox: inbox,
                             onItem: configuration.onItem, onGroup: configuration.onGroup,
                             refreshHook: configuration.refreshHook,
                             maxGroupHooks: configuration.maxHooks)
        control = ControlHandler(directory: layout.control, logger: logger)
        drain = Drain(enabled: (configuration.once || configuration.due) && configuration.inotify, layout: layout, logger: logger)
        publishing = Publishing(store: store, io: io, logger: logger, urls: urls, metrics: counts, space: space)
        groupEnds = GroupEnds(store: store, io: io, logger: logger, urls: urls, table: table, ledger: ledger,
                              requestFile: requestFile, hooks: hooks)
        driver = try TransferDriver(configuration: configuration, store: store, logger: logger)
        wakeTarget.set(driver.session.waker)
        let inbox = self.inbox
        contentStore = try ContentStoreRoom.open(configuration, spool: layout, worker: status.workerName, metrics: counts,
                                                 post: { inbox.post($0) }, logger: logger)
    }

    /// Runs until drained (`once`) or until SIGTERM/SIGINT.
    public func run() throws(DaemonError) -> RunSummary {
        HeapPolicy.keepFreedMemoryForReuse()
        watcher = try startUp()
        while true {
            let messages = inbox.drain()
            for message in messages { route(message) }
            let ended: [TransferOutcome]
            do { ended = try driver.session.performTransfers() } catch {
                logger.critical("the transfer session failed: \(error)")
                beginStop(reason: "libcurl failed")
                ended = []
            }
            for (record, facts) in driver.bodiesBegan() { hostAnswered(record, facts) }
            driver.checkpointsReached()
            growSegments()
            for outcome in ended {
                guard var (record, end) = driver.ended(outcome) else { continue }
                if let (next, credentials) = contentStore?.fallThrough(record, end) {
                    fetchAgain(record, hashedMirror: next, credentials: credentials)
                    continue
                }
                if end.fault?.diskFull == true {
                    end.neverFits = space.never(body: outcome.facts.rangeTotal ?? outcome.facts.contentLength)
                }
                if !end.outage && end.fault?.cancelled != true { end.pacedRefusal = hostAnswered(record, outcome.facts, ended: true) }
                send(.transferEnded(end), to: record)
            }
            if !messages.isEmpty || !ended.isEmpty { status.markDirty() }
            turn(now: Date())
            if shouldExit() { break }
            heap.turnEnded(working: !messages.isEmpty || !driver.running.isEmpty || table.publishingCount > 0)
            tendWatcher()
            if configuration.once { reportDrainWait() }
            do { try driver.session.sleep(timeoutMilliseconds: sleepMilliseconds()) } catch {
                logger.critical("the transfer session failed: \(error)")
                beginStop(reason: "libcurl failed")
            }
        }
        networkMonitor?.stop()
        contentStore?.close()
        hooks.waitForAll()
        requestFile.closeKept()
        // The worker folder goes when it holds no claim; with claims left (a stop, a --due drain)
        // it stays, and its lock, released with the process, lets the next worker adopt them.
        store.releaseWorkerFolder()
        writeMetrics(now: Date())
        metrics.remove()
        status.remove()
        logger.info("spoolfetch stopped", metadata: [
            "published": "\(summary.published)", "failed": "\(summary.failed)", "rejected": "\(summary.rejected)",
            "unclaimed": "\(summary.unclaimed)"])
        return summary
    }

    // MARK: The loop

    /// Everything due at `now`: retries of publishes and group ends, space and adoption checks,
    /// the scheduler's starts and pauses, the status report.
    private func turn(now: Date) {
        publishing.kick(now: now)
        groupEnds.retryDue(now: now)
        if stopping { return }
        for due in deadlines.takeDue(now: now) {
            guard let request = table.wakeRequest(named: due.request), request.inode == due.inode else { continue }
            logger.warning("deadline passed; items not ended fail", metadata: ["request": "\(request.name)",
                                                                              "deadline": "\(RFC3339.format(due.at))"])
            for record in request.items where due.covers(record.index) { send(.deadlinePassed, to: record) }
        }
        for record in space.release(now: now, running: Array(driver.running.values)) {
            send(.spaceAvailable, to: record)
        }
        for (record, decision, credentials) in contentStore?.check(now: now, record: table.item) ?? [] {
            storeWaitEnded(record, decision, credentials: credentials)
        }
        intake.adoptIfDue(now: now, interval: configuration.adoptInterval)
        takeInBacklog()
        if let at = driver.rateChangesAt, at <= now {
            driver.applyRateSchedule(now: now)
            status.markDirty()
        }
        // Only as many starts as the open-file budget allows: a disk that publishes slower than
        // the network delivers slows the downloads down instead of failing them with EMFILE.
        let maxStarts = descriptors.starts(withOpen: driver.running.count + table.publishingCount)
        let actions = scheduler.nextActions(now: now, maxStarts: maxStarts)
        for action in actions {
            switch action {
            case .start(let key):
                guard let record = table.wake(key) else { scheduler.finished(key); continue }
                let fits = space.answer(for: record, running: driver.running.values)
                if scheduler.isProbe(key) {
                    logger.info("probing an unreachable host", metadata: ["host": "\(record.hostKey)", "item": "\(record.id)"])
                }
                send(.slotGranted(space: fits), to: record)
            case .pause(let key):
                guard let record = table.item(key) else { continue }
                send(.preempted, to: record)
                logger.info("transfer paused; partial kept", metadata: ["item": "\(record.id)", "bytes": "\(record.bytesOnDisk)"])
            }
        }
        if !actions.isEmpty { status.markDirty() }
        if let due = status.nextWrite(anyRunning: !driver.running.isEmpty || hooks.running > 0), due <= now {
            writeStatus(now: now)
        }
        if let due = metrics.nextWrite, due <= now { writeMetrics(now: now) }
    }

    /// Until the nearest deadline (scheduler timers, publish and group-end retries, the space
    /// check, the adoption scan, the status report and the metrics, the next change of
    /// `--max-rate`); "forever" when there is none, and not at all while the intake backlog holds
    /// request files.
    private func sleepMilliseconds() -> Int32 {
        if !intake.backlogIsEmpty && !stopping { return 0 }
        let now = Date()
        let deadlines = [scheduler.nextWakeup(now: now), driver.session.nextRateDeadline(), driver.rateChangesAt,
                         publishing.nextRetry, groupEnds.nextRetry, space.checkAt, deadlines.next,
                         intake.nextAdoptionScan, status.nextWrite(anyRunning: !driver.running.isEmpty || hooks.running > 0),
                         metrics.nextWrite, contentStore?.nextCheck]
        guard let next = deadlines.compactMap({ $0 }).min() else { return Int32.max }
        let ms = (next.timeIntervalSince(now) * 1000).rounded(.up)
        return Int32(max(0, min(ms, Double(Int32.max))))
    }

    // MARK: Messages

    func route(_ message: EngineMessage) {
        switch message {
        case .ioDone(let answer):
            route(io.answer(answer))
        case .watcher(.arrived(let name)):
            claim(name)
        case .watcher(.listing(let names, let initial)):
            if !initial { logger.warning("inotify queue overflowed; rescanned incoming/", metadata: ["files": "\(names.count)"]) }
            intake.listed(names, initial: initial)
        case .watcher(.control(let name)):
            control.handle(name, request: table.wakeRequest(named:)) { record, verb in
                // `retry` starts a waiting item now: the operator also wins over a 429/503 hold.
                if verb == .retry, record.phase == .retrying { scheduler.releaseHold(record.hostKey) }
                return !send(.operatorCommand(OperatorVerb(verb)), to: record).isEmpty
            }
            status.markDirty()
        case .watcher(.rescanned(let names)):
            intake.listed(names)
        case .watcher(.folderLost(let folder, let reason)):
            logger.error("watched folder lost; made again and watched again: \(reason)", metadata: ["folder": "\(folder)"])
            watcherTrouble = "\(folder) was lost (\(reason)); made again"
            for directory in [layout.incoming, layout.control] where directory.path == folder {
                do { try directory.reopen() } catch { logger.error("could not open the watched folder again: \(error)") }
            }
            status.markDirty()
        case .watcher(.stopped):
            watcher = nil
            drain.watch.watcherStopped()
        case .watcher(.failed(let reason)):
            logger.critical("watcher stopped: \(reason)")
            watcherTrouble = "stopped: \(reason)"
            summary.watcherFailed = true
            beginStop(reason: "watcher failed")
        case .published(let results):
            ledger.attach(results, requestOf: { table.item(forBase: $0)?.request })
            contentStore?.published(results, item: table.item(forBase:), io: io)
            for (record, event) in publishing.batchEnded(results, item: table.item(forBase:)) { send(event, to: record) }
        case .groupEnded(let name, let markerPath, let journal, let error):
            let drains = configuration.once || configuration.due
            if groupEnds.ended(name, markerPath: markerPath, journal: journal, error: error, drain: drains) == .abandoned {
                summary.unended += 1
            }
        case .rejected(let request, let error):
            intake.rejectionFiled(request, error: error)
        case .uploadsRecorded(let results):
            for (record, event) in publishing.uploadsRecorded(results, item: table.item) { send(event, to: record) }
        case .outgoingFiled(let name, let error):
            if let error { logger.warning("could not move a failed upload's file into failed/: \(error)", metadata: ["file": "\(name)"]) }
        case .groupHookFinished(let journal):
            hooks.groupHookFinished(journal)
        case .refreshEnded(let key, let attempt, let outcome, let line):
            refreshEnded(key: key, attempt: attempt, outcome: outcome, line: line)
        case .itemHookFinished:
            break
        case .reload:
            reload()
        case .networkChanged(let routes, let addresses):
            let hosts = scheduler.probeNow(Date())
            if !hosts.isEmpty {
                logger.notice("the network changed; probing unreachable hosts now", metadata: [
                    "hosts": "\(hosts.joined(separator: ","))", "new-routes": "\(routes)", "new-addresses": "\(addresses)"])
            }
        case .networkMonitorFailed(let why):
            logger.warning("stopped watching for network changes; unreachable hosts are probed on their back-off only: \(why)")
        case .storeIngested(let digest, let outcome, let evicted, let totals, let error):
            contentStore?.ingested(digest: digest, outcome: outcome, evicted: evicted, totals: totals, error: error)
            metrics.changed()
        case .storeCopied(let key, let digest, let bytes, let error):
            storeCopied(key: key, digest: digest, bytes: bytes, error: error)
        case .stop(let signal):
            beginStop(reason: signal == SIGINT ? "SIGINT" : "SIGTERM")
        }
    }

    private func beginStop(reason: String) {
        guard !stopping else { return }
        stopping = true
        logger.notice("stopping: no new claims; partial downloads are kept", metadata: ["reason": "\(reason)"])
        ServiceNotifier.notify("STOPPING=1")
        for record in Array(driver.running.values) { send(.stop, to: record) }
        for key in contentStore?.waitingKeys ?? [] { if let record = table.item(key) { send(.stop, to: record) } }
    }

    private func writeStatus(now: Date) {
        let window = scheduler.configuration.window
        status.write(now: now, table: table, window: window, task: { record in
            var task = StatusReporter.task(record, now: now, progress: self.driver.progress(of: record), window: window, urls: self.urls)
            task.connections = self.driver.session.connections(of: record.key)
            if let waits = self.contentStore?.waitDescription(record.key) { task.state = "waiting-store"; task.waitingFor = waits }
            return task
        }, running: driver.running.count, summary: summary,
           hooksRunning: hooks.running, hooksWaiting: hooks.waiting, outages: scheduler.hostOutages,
           watcher: watcherTrouble,
           maxRate: driver.rateInForce > 0 || driver.rateChangesAt != nil ? (driver.rateInForce, driver.rateChangesAt) : nil)
        metrics.changed()
    }

    /// The gauges from the last status report and the engine's parts, then the text if it changed.
    func writeMetrics(now: Date) {
        var snapshot = DaemonMetrics.Snapshot()
        snapshot.store = contentStore.map { ($0.totals.entries, $0.totals.bytes) }
        if let d = status.lastDaemon {
            snapshot.states = d.states ?? [:]
            snapshot.queued = d.queued
        }
        snapshot.running = driver.running.count
        snapshot.connections = scheduler.connectionsInUse
        snapshot.outages = status.lastOutages
        snapshot.oldestQueued = status.oldestQueued
        snapshot.maxRate = driver.rateInForce
        snapshot.hooksRunning = hooks.running
        snapshot.hooksWaiting = hooks.waiting
        metrics.write(now: now, snapshot: snapshot, bytesReceived: driver.session.bodyBytesReceived)
    }
}
