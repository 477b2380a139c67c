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
/// lifecycle, has the rooms carry out the actions that come back (`executor`, `ItemShell`), and sleeps
/// until the earliest deadline. docs/ARCHITECTURE.md draws the rooms and their threads.
///
/// Other threads — the watcher, the I/O queue (publishing, group ends, rejections), the hook
/// runner and the signal reader — never touch the engine's state; they post to the inbox.
public final class Engine {
    // What the daemon was started with, and how it writes things down.
    var configuration: DaemonConfiguration
    var logger: Logger
    let store: SpoolStore

    // The loop: its inbox and the I/O queue that posts to it.
    let inbox: Inbox
    let io: IOQueue

    // The rooms, each owning its state.
    /// The scheduler, and what is learnt of hosts (outages, pacing, segments).
    let hosts: Hosts
    /// Every claimed request and item (their phases live in the items' lifecycles).
    let items: Items
    let intake: Intake
    let driver: TransferDriver
    let space: SpaceGate
    let publishing: Publishing
    let groupEnds: GroupEnds
    let hooks: HookDispatch
    let operators: Operators
    /// Whether the run stops, its tally, its drain, and what the process holds while it runs.
    let runState: RunState
    /// Every item event goes in here (`executor.send(event, to: record)`): the item's lifecycle
    /// decides, and the actions are carried out through the rooms (`ItemShell`). Set last in
    /// `init`, as its ports hold the engine.
    private(set) var executor: ItemExecutor<ItemShell>!

    public init(configuration: DaemonConfiguration, logger: Logger) throws(DaemonError) {
        do { try configuration.validate() } catch { throw .configuration(error) }
        if let netrc = configuration.netrcFile {
            do throws(PrivateFile.Refused) { _ = try PrivateFile.read(netrc) } catch {
                throw .configuration(ConfigurationError("--netrc-file: \(error)"))
            }
        }
        self.configuration = configuration
        self.logger = logger
        let urls = URLPrivacy(keepsQueries: configuration.keepURLQueries)
        let layout: SpoolLayout
        do {
            layout = try SpoolLayout(root: configuration.spool, finalFolder: configuration.finalFolder)
        } catch {
            throw .spool(error)
        }
        store = SpoolStore(layout: layout, maxRequestBytes: Int(clamping: configuration.maxRequestBytes))
        hosts = Hosts(configuration: configuration, logger: logger)
        items = Items(configuration: configuration)
        let wakeTarget = WakeTarget()
        inbox = Inbox(wake: wakeTarget)
        io = IOQueue(inbox: inbox)
        if let problem = SpaceGate.impossibleMinFree(configuration.minFree, layout: layout) {
            throw .configuration(ConfigurationError(problem))
        }
        space = SpaceGate(layout: layout, minFree: configuration.minFree, logger: logger)
        let ledger = JournalLedger(staging: layout.staging)
        intake = Intake(store: store, io: io, logger: logger, ledger: ledger, table: items.table, maxItems: configuration.maxItems,
                        maxRequestBytes: Int(clamping: configuration.maxRequestBytes))
        let status = StatusReporter(directory: layout.status, spoolRoot: layout.root, logger: logger, store: configuration.storePath)
        let counts = DaemonMetrics(worker: status.workerName, version: Daemon.version, startedAt: Date())
        let metrics: MetricsWriter
        do {
            metrics = try MetricsWriter(metrics: counts, statusFolder: layout.status, statusName: status.workerName + ".prom",
                                        path: configuration.metricsFile, interval: configuration.metricsInterval, logger: logger)
        } catch {
            throw .configuration(ConfigurationError("--metrics-file: its folder cannot be opened: \(error)"))
        }
        operators = Operators(status: status, metrics: metrics, control: ControlHandler(layout: layout, logger: logger,
                                                                                      operators: configuration.operators ?? SpoolOwnership.operatorsGroup(root: configuration.spool)))
        hooks = HookDispatch(runner: HookRunner(logger: logger, timeout: configuration.hookTimeout,
                                                maxRunning: configuration.maxHooks, metrics: counts), store: store, inbox: inbox,
                             onItem: configuration.onItem, onGroup: configuration.onGroup,
                             refreshHook: configuration.refreshHook,
                             maxGroupHooks: configuration.maxHooks)
        runState = RunState(drain: Drain(enabled: (configuration.once || configuration.due) && configuration.inotify,
                                         layout: layout, logger: logger))
        publishing = Publishing(store: store, io: io, logger: logger, urls: urls, metrics: counts, space: space, ledger: ledger)
        groupEnds = GroupEnds(store: store, io: io, logger: logger, urls: urls, table: items.table, ledger: ledger,
                              requestFile: items.requestFile, hooks: hooks)
        driver = try TransferDriver(configuration: configuration, store: store, logger: logger)
        wakeTarget.set(driver.session.waker)
        driver.session.room.rules = BodyRoomAnswers(space: space, driver: driver)
        driver.book.ports.engine = self
        let inbox = self.inbox
        driver.contentStore = try ContentStoreRoom.open(configuration, spool: layout, worker: status.workerName, metrics: counts,
                                                 post: { inbox.post($0) }, logger: logger)
        executor = ItemExecutor(ports: ItemShell(engine: self))
        driver.contentStore?.attach(engine: self)
    }

    /// Runs until drained (`once`) or until SIGTERM/SIGINT.
    public func run() throws(DaemonError) -> RunSummary {
        HeapPolicy.keepFreedMemoryForReuse()
        runState.watcher = try startUp()
        runState.drain.supersedeRecord()
        while true {
            let messages = inbox.drain()
            for message in messages { route(message) }
            let ended: [TransferOutcome]
            do { ended = try driver.session.performTransfers() } catch {
                logger.critical("the transfer session failed: \(error)")
                beginStop(reason: "libcurl failed")
                ended = []
            }
            // The session's lists are taken here, and a room is asked only when one holds
            // something: most turns begin no body and reach no checkpoint. What each start, end
            // and checkpoint decides (the part, the end the machine is told, resume states, the
            // host's one answer) is the driver's `TransferBook`'s.
            let starts = driver.session.takeBodyStarts()
            let anyStarts = !starts.isEmpty
            if anyStarts {
                // A body that began and ends whole within this turn is answered once, at its end.
                var endingWhole: Set<Int> = []
                for outcome in ended where outcome.failure == nil { endingWhole.insert(outcome.key) }
                driver.bodiesBegan(starts, endingWhole: endingWhole)
            }
            let checkpoints = driver.session.takeCheckpoints()
            let anyCheckpoints = !checkpoints.isEmpty
            if anyCheckpoints { driver.checkpointsReached(checkpoints) }
            // The segments and the hosts' adaptive limits, asked only when either has something.
            let hostsChanged = (driver.session.hasSegmentWork || hosts.scheduler.hasHostLimitChanges)
                && hosts.tendSegments(driver, now: Date())
            if hostsChanged { operators.status.dirty = true }
            for outcome in ended {
                guard let (record, event) = driver.ended(outcome) else { continue }
                executor.send(event, to: record)
            }
            if !messages.isEmpty || !ended.isEmpty { operators.status.dirty = true }
            // A wake-up that brought nothing — socket activity of a body in flight: no message,
            // no transfer's end, no body start or checkpoint, no segmented transfer — before the
            // nearest deadline the last turn left has nothing for a turn to do (every room's
            // work is an event or a deadline): the loop sleeps again.
            let now = Date()
            let nothingCame = messages.isEmpty && ended.isEmpty && !anyStarts && !anyCheckpoints && !hostsChanged
                && !driver.session.hasSegments && intake.backlogIsEmpty
            var nothingDue = true
            if let deadline = runState.nextDeadline { nothingDue = now < deadline }
            let quiet = nothingCame && nothingDue
            if !quiet { runState.reportDue = turn(now: now) }
            // A plain `run` ends only by a stop; a drain (`--once`, `--due`) asks each turn.
            if runState.stopping || configuration.once || configuration.due, shouldExit() { break }
            // The heap policy is told only of a change: work after a give-back, or the first
            // quiet turn after work.
            let working = !messages.isEmpty || !driver.running.isEmpty || items.table.publishingCount > 0
            if working != runState.heap.workedSinceGiveBack { runState.heap.turnEnded(working: working) }
            if runState.drain.enabled { tendWatcher() }
            if configuration.once { reportDrainWait() }
            // A quiet wake-up sleeps towards what the last turn left: no room's deadline moved,
            // only the rate gate's (no list of eleven deadlines made at every socket wake-up).
            var timeout: Int32
            if quiet {
                var nearest = runState.roomsDeadline
                if let gate = driver.session.nextRateDeadline(), nearest == nil || gate < nearest! { nearest = gate }
                runState.nextDeadline = nearest
                timeout = Int32.max
                if let next = nearest { timeout = Int32(max(0, min((next.timeIntervalSince(now) * 1000).rounded(.up), Double(Int32.max)))) }
            } else {
                timeout = sleepMilliseconds(reportDue: runState.reportDue)
            }
            do { try driver.session.sleep(timeoutMilliseconds: timeout) } catch {
                logger.critical("the transfer session failed: \(error)")
                beginStop(reason: "libcurl failed")
            }
        }
        runState.networkMonitor?.stop()
        driver.contentStore?.close()
        hooks.waitForAll()
        items.requestFile.closeKept()
        // The worker folder goes when it holds no claim; with claims left (a stop, a --due drain)
        // it stays, and its lock, released with the process, lets the next worker adopt them.
        store.releaseWorkerFolder()
        writeMetrics(now: Date())
        if configuration.once || configuration.due { leaveDrainRecord() }
        operators.metrics.remove()
        operators.status.remove()
        logger.info("spoolfetch stopped", metadata: [
            "published": "\(runState.summary.published)", "failed": "\(runState.summary.failed)", "rejected": "\(runState.summary.rejected)",
            "unclaimed": "\(runState.summary.unclaimed)"])
        return runState.summary
    }

    // MARK: The loop

    /// Everything due at `now`: retries of publishes and group ends, space and adoption checks,
    /// the scheduler's starts and pauses, the status report. Each owner is asked only when its
    /// own deadline says something is due: most turns have none of them to do. Returns when
    /// the next status report is due (for the sleep after the turn: asked once a turn).
    private func turn(now: Date) -> Date? {
        if let at = publishing.handOverAt, at <= now { publishing.kick(now: now) }
        if let at = groupEnds.nextRetry, at <= now { groupEnds.retryDue(now: now) }
        if runState.stopping {
            if items.table.hasDrowsy { items.table.sleepWaiting() }
            return operators.status.nextWrite(anyRunning: !driver.running.isEmpty || hooks.running > 0, now: now)
        }
        if let at = items.deadlines.next, at <= now {
            for due in items.deadlines.takeDue(now: now) {
                guard let request = items.table.wakeRequest(named: due.request), request.inode == due.inode else { continue }
                logger.warning("deadline passed; items not ended fail", metadata: ["request": "\(request.name)",
                                                                                  "deadline": "\(RFC3339.format(due.at))"])
                for record in request.items where due.covers(record.index) { executor.send(.deadlinePassed, to: record) }
            }
        }
        if let at = space.checkAt, at <= now {
            for record in space.release(now: now, running: Array(driver.running.values)) { executor.send(.spaceAvailable, to: record) }
        }
        if let contentStore = driver.contentStore, contentStore.executor.check(now: now) > 0 { operators.status.dirty = true }
        if let at = intake.nextAdoptionScan, at <= now { intake.adoptIfDue(now: now, interval: configuration.adoptInterval) }
        if !intake.backlogIsEmpty { takeInBacklog() }
        if let at = driver.rateChangesAt, at <= now {
            driver.applyRateSchedule(now: now)
            operators.status.dirty = true
        }
        // Only as many starts as the open-file budget allows: a disk that publishes slower than
        // the network delivers slows the downloads down instead of failing them with EMFILE.
        // (With nothing queued there is nothing to start, and the budget is not asked.)
        let maxStarts = hosts.scheduler.queuedCount == 0 ? 0
            : runState.descriptors.starts(withOpen: driver.running.count + items.table.publishingCount)
        let actions = hosts.scheduler.nextActions(now: now, maxStarts: maxStarts)
        for action in actions {
            switch action {
            case .start(let key):
                if let contentStore = driver.contentStore, contentStore.executor.slotGranted(key) {
                    operators.status.dirty = true
                    continue
                }
                guard let record = items.table.wake(key) else { hosts.scheduler.finished(key); continue }
                let fits = space.answer(for: record, running: driver.running.values)
                if hosts.isProbe(key) {
                    logger.info("probing an unreachable host", metadata: ["host": "\(record.hostKey)", "item": "\(record.id)"])
                }
                executor.send(.slotGranted(space: fits), to: record)
            case .pause(let key):
                guard let record = items.table.item(key) else { continue }
                executor.send(.preempted, to: record)
                logger.info("transfer paused; partial kept", metadata: ["item": "\(record.id)", "bytes": "\(record.bytesOnDisk)"])
            }
        }
        if !actions.isEmpty { operators.status.dirty = true }
        // What intake took in this turn and the scheduler did not start stays small until
        // something needs it.
        if items.table.hasDrowsy { items.table.sleepWaiting() }
        // What this turn made ready to publish after the kick above — a hit from the content
        // store starts and is verified within its start, adopted jobs — goes now, not at the
        // next wake-up (which the sleep below does not bring forward: up to a second later).
        if let at = publishing.handOverAt, at <= now { publishing.kick(now: now) }
        let anyRunning = !driver.running.isEmpty || hooks.running > 0
        var reportDue = operators.status.nextWrite(anyRunning: anyRunning, now: now)
        if let due = reportDue, due <= now {
            writeStatus(now: now)
            reportDue = operators.status.nextWrite(anyRunning: anyRunning, now: now)
        }
        if let due = operators.metrics.nextWrite, due <= now { writeMetrics(now: now) }
        return reportDue
    }

    /// Until the nearest deadline (scheduler timers, publish and group-end retries, the space
    /// check, the adoption scan, the status report and the metrics, the next change of
    /// `--max-rate`); "forever" when there is none, and not at all while the intake backlog holds
    /// request files. `reportDue`: the status report's, as the turn left it.
    private func sleepMilliseconds(reportDue: Date?) -> Int32 {
        if !intake.backlogIsEmpty && !runState.stopping {
            runState.nextDeadline = .distantPast
            return 0
        }
        let now = Date()
        let wakeups = [hosts.scheduler.nextWakeup(now: now), driver.rateChangesAt,
                         publishing.nextRetry, groupEnds.nextRetry, space.checkAt, items.deadlines.next,
                         intake.nextAdoptionScan, reportDue,
                         operators.metrics.nextWrite, driver.contentStore?.executor.nextCheck]
        var nearest: Date? = nil
        for case let wakeup? in wakeups where nearest == nil || wakeup < nearest! { nearest = wakeup }
        runState.roomsDeadline = nearest
        if let gate = driver.session.nextRateDeadline(), nearest == nil || gate < nearest! { nearest = gate }
        runState.nextDeadline = nearest
        guard let next = nearest else { return Int32.max }
        let ms = (next.timeIntervalSince(now) * 1000).rounded(.up)
        return Int32(max(0, min(ms, Double(Int32.max))))
    }
}
