import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore

/// The daemon's live report, `status/HOST-PID.json`, read by `spoolfetch status`: written
/// atomically at most once a second while transfers run, once after any other change, and never
/// while idle (idle means asleep). A change after a quiet spell is written `settle` later, not at
/// once: a small request that starts and ends within it is reported once, ended, instead of
/// twice, and its walk to its marker carries no report.
final class StatusReporter {
    private let directory: Directory
    private let spoolRoot: String
    private let logger: Logger
    private let startedAt = Date()
    /// `HOST-PID`: the report's name, and the metrics' `worker` label.
    let workerName = "\(ProcessInfo.processInfo.hostName)-\(getpid())"
    var fileName: String { workerName + ".json" }
    /// Something changed since the last report was written: the next turn writes a report
    /// (anyone may set it; only `write` clears it).
    var dirty = true
    private var lastWrite: Date?
    /// When the next report is due, once a turn has asked (`nextWrite`); cleared by `write`.
    private var due: Date?
    /// How long a change after a quiet spell waits for the changes that follow it (the first
    /// report at start-up waits for nothing).
    static let settle: TimeInterval = 0.5
    /// Items that ended recently, newest last: the last `recentLimit` are reported (the list
    /// holds up to twice as many between trims).
    private var recentlyEnded: [TaskStatus] = []
    static let recentLimit = 100
    private var warnedWriteFailure = false
    /// Intake's warnings about URLs that expire before their items may start, newest last.
    private var expiryWarnings: [String] = []
    static let expiryWarningLimit = 20
    /// The daemon's part of the last report, when the longest-waiting item was first queued then,
    /// and the hosts held then (for the metrics: the gauges of one metrics text all describe the
    /// same moment, so a host shown unreachable never comes with a queue counted before it).
    private(set) var lastDaemon: DaemonStatus?
    private(set) var oldestQueued: Date?
    private(set) var lastOutages: [(host: String, since: Date)] = []
    /// The last report written whole: a drain's exit leaves it behind as its record (`DrainRecord`).
    private(set) var lastReport: StatusReport?

    /// The content store's folder (`--store`), named in each report for `spoolfetch store`.
    private let storePath: String?

    init(directory: Directory, spoolRoot: String, logger: Logger, store: String? = nil) {
        self.directory = directory
        self.spoolRoot = spoolRoot
        self.logger = logger
        // Absolute, as every path the spool's records give (a relative --spool makes SPOOL/store relative).
        storePath = store.map { $0.hasPrefix("/") ? $0 : FileManager.default.currentDirectoryPath + "/" + $0 }
    }

    /// Keeps an intake warning for the report (the last `expiryWarningLimit`).
    func noteExpiryWarning(_ text: String) {
        expiryWarnings.append(text)
        if expiryWarnings.count > Self.expiryWarningLimit { expiryWarnings.removeFirst() }
        dirty = true
    }

    /// When the next report is due; nil when nothing changed and nothing runs. A report written
    /// with an old queue scan (see `scanQueue`) is written once more when a new scan is allowed,
    /// so the last report of a burst never keeps stale counts while the daemon sleeps.
    func nextWrite(anyRunning: Bool, now: Date) -> Date? {
        guard dirty || anyRunning else {
            guard staleScan, let last = lastScan else { return nil }
            return last.at.addingTimeInterval(Self.scanInterval)
        }
        guard let last = lastWrite else { return .distantPast }
        if let due { return due }
        // Within a second of the last report the once-a-second rule holds the next anyway; a
        // change after a quiet spell waits `settle` for those that follow it.
        let second = last.addingTimeInterval(1)
        let next = second > now ? second : now.addingTimeInterval(Self.settle)
        due = next
        return next
    }

    /// Paused items listed in a report at most (the others counted in `states`).
    static let pausedListed = 1000

    /// `record` ended: its line among the recently ended (made now, while it still holds its
    /// description).
    func itemEnded(_ record: ItemRecord, urls: URLPrivacy) {
        recentlyEnded.append(Self.task(record, now: Date(), progress: nil, window: nil, hostWait: nil, urls: urls))
        // Trimmed to the last `recentLimit` only once twice as many have ended: shifting the
        // whole list at every item end would copy 100 entries per item.
        if recentlyEnded.count >= 2 * Self.recentLimit { recentlyEnded.removeFirst(recentlyEnded.count - Self.recentLimit) }
        dirty = true
    }

    /// What the waiting part of the queue looks like: counts per state and the next items due.
    /// Computed by a scan of every item, which at a million items takes tens of milliseconds: so it
    /// is redone at most every `scanInterval` for a large queue (a small one is scanned each time).
    struct QueueScan {
        var states: [String: Int] = [:]
        /// The next items due, by (due time, key), first first.
        var nextDue: [(due: Double, key: Int)] = []
        var waiting = 0
        /// When the longest-waiting queued item was first queued (seconds since 2001).
        var oldestQueued: Double?
        /// The expected sizes of the waiting items that give one, and how many give none.
        var waitingBytes: Int64 = 0
        var waitingUnknown = 0
    }
    private var lastScan: (at: Date, scan: QueueScan)?
    /// The last report used a scan older than the queue's latest change.
    private var staleScan = false
    /// How old the waiting counts and the next-due list may get for a queue of more than
    /// `scanAlwaysBelow` items.
    static let scanInterval: Double = 10
    static let scanAlwaysBelow = 20_000

    private func scanQueue(_ table: ItemTable, now: Date, window: DailyWindow?) -> QueueScan {
        if let last = lastScan, table.itemCount >= Self.scanAlwaysBelow, now.timeIntervalSince(last.at) < Self.scanInterval {
            staleScan = true
            return last.scan
        }
        staleScan = false
        var scan = QueueScan()
        let windowClosed = window.map { !$0.contains(now, in: .current) } ?? false
        let nowSeconds = now.timeIntervalSince1970
        // Plain counters and no allocation per item: at a million items this scan runs on the
        // engine thread, and a drop arriving meanwhile waits for it.
        var waitingStart = 0, waitingWindow = 0, pending = 0
        // The next due: a small list kept sorted by (due time, key); a heap is not worth it for 20.
        let shown = StatusReport.pendingShown
        func consider(key: Int, due: Double, discretionary: Bool) {
            switch ItemStatus.queued(earliestStart: due, discretionary: discretionary, windowClosed: windowClosed, now: nowSeconds) {
            case .waitingStart: waitingStart += 1
            case .waitingWindow: waitingWindow += 1
            case .pending: pending += 1
            }
            if scan.nextDue.count == shown, let last = scan.nextDue.last, (due, key) >= (last.due, last.key) { return }
            let at = scan.nextDue.firstIndex { (due, key) < ($0.due, $0.key) } ?? scan.nextDue.endIndex
            scan.nextDue.insert((due, key), at: at)
            if scan.nextDue.count > shown { scan.nextDue.removeLast() }
        }
        var oldest = Double.infinity
        var waitingBytes: Int64 = 0, waitingUnknown = 0
        for record in table.items.values {
            guard case .queued = record.phase else { continue }
            consider(key: record.key, due: record.earliestStart?.timeIntervalSince1970 ?? 0, discretionary: record.discretionary)
            oldest = min(oldest, record.lifecycle.firstQueued.timeIntervalSinceReferenceDate)
            if let e = record.expectedBytes { waitingBytes &+= max(0, e - record.bytesOnDisk) } else { waitingUnknown += 1 }
        }
        if table.dormant.count > 0 {
            table.dormant.forEachWaiting { key, summary, firstQueued in
                consider(key: key, due: summary.earliestStart?.timeIntervalSince1970 ?? 0, discretionary: summary.discretionary)
                oldest = min(oldest, firstQueued)
                if let e = summary.expectedBytes { waitingBytes &+= e } else { waitingUnknown += 1 }
                return true
            }
        }
        scan.waitingBytes = waitingBytes
        scan.waitingUnknown = waitingUnknown
        if oldest.isFinite { scan.oldestQueued = oldest }
        scan.waiting = waitingStart + waitingWindow + pending
        for (label, n) in [("waiting-start", waitingStart), ("waiting-window", waitingWindow), ("pending", pending)] where n > 0 {
            scan.states[label] = n
        }
        lastScan = (now, scan)
        return scan
    }

    /// Writes the report: the items that are not just waiting (running, retrying, waiting for
    /// space, paused, publishing), the next waiting ones due, the recently ended ones, and counts
    /// per state. It never lists a large queue whole.
    /// Hosts with transfers running, as the engine saw them when it wrote the report (set by
    /// `Engine.writeStatus` from `Hosts.busyHosts`).
    var busyHosts: [BusyHost] = []

    func write(now: Date, table: ItemTable, window: DailyWindow?,
               task: (ItemRecord) -> TaskStatus, running: Int, summary: RunSummary,
               hooksRunning: Int, hooksWaiting: Int, outages: [HostOutage], watcher: String?,
               maxRate: (rate: Int64, until: Date?)? = nil) {
        let scan = scanQueue(table, now: now, window: window)
        var states = scan.states
        var tasks: [TaskStatus] = []
        // A paused request of 200,000 items is counted, and only its first `pausedListed` listed.
        var listed: [ItemRecord] = []
        var paused: [ItemRecord] = []
        for record in table.active.values {
            if record.phase == .paused { paused.append(record) } else { listed.append(record) }
        }
        if paused.count > Self.pausedListed {
            paused.sort { $0.key < $1.key }
            states["paused", default: 0] += paused.count - Self.pausedListed
            paused.removeLast(paused.count - Self.pausedListed)
        }
        listed += paused
        for record in listed.sorted(by: { $0.key < $1.key }) {
            let status = task(record)
            states[status.state, default: 0] += 1
            tasks.append(status)
        }
        // The daemon's rate is the sum of its items' (each over the same moving window), and its
        // ETA what is still to come at that rate: the open items' known or expected sizes, the
        // waiting ones' too. Items with no size are counted apart (`unknownSizes`), not taken
        // for nothing.
        let rates = tasks.compactMap { $0.state == "running" ? $0.rate : nil }
        let rate: Double? = rates.isEmpty ? nil : rates.reduce(0, +)
        var remaining = scan.waitingBytes
        var unknownSizes = scan.waitingUnknown
        for t in tasks {
            if let expected = t.expected { remaining += max(0, expected - t.bytes) } else if t.state != "publishing" { unknownSizes += 1 }
        }
        for entry in scan.nextDue { table.withQueuedView(entry.key) { tasks.append(task($0)) } }
        tasks += recentlyEnded.suffix(Self.recentLimit)
        var daemon = DaemonStatus(
            host: ProcessInfo.processInfo.hostName, pid: getpid(), version: Daemon.version, spool: spoolRoot,
            startedAt: RFC3339.format(startedAt), updatedAt: RFC3339.format(now), running: running,
            queued: scan.waiting, published: summary.published, failed: summary.failed,
            rejected: summary.rejected)
        daemon.hooksRunning = hooksRunning
        daemon.hooksWaiting = hooksWaiting
        daemon.rate = rate
        if let rate, rate > 0, remaining > 0 { daemon.eta = Double(remaining) / rate }
        daemon.unknownSizes = unknownSizes > 0 ? unknownSizes : nil
        daemon.states = states
        daemon.maxRate = maxRate?.rate
        daemon.maxRateUntil = maxRate?.until.map(RFC3339.format)
        daemon.watcher = watcher
        daemon.store = storePath
        if !expiryWarnings.isEmpty { daemon.urlExpiryWarnings = expiryWarnings }
        if !outages.isEmpty {
            daemon.unreachableHosts = outages.map {
                UnreachableHost(host: $0.hostKey, since: RFC3339.format($0.since), lastError: $0.lastError,
                                failures: $0.failures, nextProbe: RFC3339.format($0.nextProbe))
            }
        }
        if !busyHosts.isEmpty { daemon.busyHosts = busyHosts }
        lastDaemon = daemon
        oldestQueued = scan.oldestQueued.map { Date(timeIntervalSinceReferenceDate: $0) }
        lastOutages = outages.map { ($0.hostKey, $0.since) }
        let report = StatusReport(daemon: daemon, tasks: tasks, morePending: max(0, scan.waiting - scan.nextDue.count))
        lastReport = report
        do {
            try directory.writeAtomically(fileName, SpoolJSON.encode(report))
            warnedWriteFailure = false
        } catch {
            if !warnedWriteFailure { logger.warning("could not write the status report: \(error)") }
            warnedWriteFailure = true
        }
        lastWrite = now
        due = nil
        dirty = false
    }

    /// One item as `spoolfetch status` shows it: its state and what it waits for are the core's
    /// (`ItemMachine.status`); `progress` is the running transfer's, if any.
    static func task(_ record: ItemRecord, now: Date, progress: (bytes: Int64, total: Int64?)?,
                     window: DailyWindow?, hostWait: HostWait?, space: SpaceShortage? = nil,
                     urls: URLPrivacy) -> TaskStatus {
        let status = record.lifecycle.status(ItemStatusFacts(
            now: now, earliestStart: record.earliestStart, discretionary: record.discretionary, window: window,
            timeZone: .current, hostKey: record.hostKey, hostWait: hostWait, space: space))
        var bytes = record.bytesOnDisk
        var expected = record.expectedBytes
        var rate: Double? = nil
        var eta: Double? = nil
        var finishedAt: String? = nil
        var error: String? = record.lastFailure.map { "\($0)" }
        switch record.phase {
        case .running:
            if let progress {
                bytes = progress.bytes
                expected = progress.total ?? expected
            }
            if let measured = record.attempt?.progress(bytes: bytes, total: expected, at: now) {
                rate = measured.rate
                eta = measured.eta
            }
        case .published:
            finishedAt = RFC3339.format(now)
            error = nil
        case .failed(let failure):
            finishedAt = RFC3339.format(now)
            error = "\(failure.code): \(failure.message)"
        default:
            break
        }
        // A waiting item keeps no URL or name: they are read again from its request file.
        let item = record.details
        var task = TaskStatus(id: record.id, request: record.request.name, group: record.request.group, name: item?.name ?? "",
                              url: urls.shown(item?.url.string ?? ""), state: status.state, bytes: bytes, expected: expected,
                              rate: rate, eta: eta, attempts: record.attempts, error: error,
                              startsAt: status.startsAt.map(RFC3339.format), finishedAt: finishedAt)
        task.waitingFor = status.waitingFor
        task.owner = record.request.ownerName
        return task
    }

    /// At exit: the report goes with the daemon.
    func remove() { directory.remove(fileName) }
}
