import Foundation
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore

/// The daemon's live report, `status/HOST-PID.json`, read by `spoolfetch status`: written
/// atomically at most once a second while transfers run, once after any other change, and never
/// while idle (idle means asleep).
final class StatusReporter {
    private let directory: Directory
    private let spoolRoot: String
    private let logger: Logger
    private let startedAt = Date()
    let fileName = "\(ProcessInfo.processInfo.hostName)-\(getpid()).json"
    private var dirty = true
    private var lastWrite: Date?
    /// Items that ended recently, newest last (at most 100).
    private var recentlyEnded: [TaskStatus] = []
    private var warnedWriteFailure = false

    init(directory: Directory, spoolRoot: String, logger: Logger) {
        self.directory = directory
        self.spoolRoot = spoolRoot
        self.logger = logger
    }

    /// Something changed: the next turn writes a report.
    func markDirty() { dirty = true }

    /// When the next report is due; nil when nothing changed and nothing runs.
    func nextWrite(anyRunning: Bool) -> Date? {
        guard dirty || anyRunning else { return nil }
        guard let last = lastWrite else { return .distantPast }
        return last.addingTimeInterval(1)
    }

    func itemEnded(_ task: TaskStatus) {
        recentlyEnded.append(task)
        if recentlyEnded.count > 100 { recentlyEnded.removeFirst(recentlyEnded.count - 100) }
        dirty = true
    }

    /// Writes the report: every open item (pending ones up to `StatusReport.pendingShown`) and
    /// the recently ended ones.
    func write(now: Date, requests: [RequestRecord], task: (ItemRecord) -> TaskStatus,
               running: Int, queued: Int, summary: RunSummary, hooksRunning: Int, hooksWaiting: Int) {
        var tasks: [TaskStatus] = []
        var pendingShown = 0, morePending = 0
        for request in requests.sorted(by: { $0.name < $1.name }) {
            for record in request.items where !record.phase.hasEnded {
                let status = task(record)
                if status.state == "pending" || status.state.hasPrefix("waiting-start") {
                    if pendingShown >= StatusReport.pendingShown { morePending += 1; continue }
                    pendingShown += 1
                }
                tasks.append(status)
            }
        }
        // The daemon's rate is the sum of its items' (each over the same moving window), and its
        // ETA what the items with a known size still need at that rate.
        let rates = tasks.compactMap { $0.state == "running" ? $0.rate : nil }
        let rate: Double? = rates.isEmpty ? nil : rates.reduce(0, +)
        let remaining = tasks.reduce(Int64(0)) { sum, t in
            guard let expected = t.expected, expected > t.bytes, t.state != "done", t.state != "failed" else { return sum }
            return sum + (expected - t.bytes)
        }
        tasks += recentlyEnded
        var daemon = DaemonStatus(
            host: ProcessInfo.processInfo.hostName, pid: getpid(), version: Daemon.version, spool: spoolRoot,
            startedAt: RFC3339.format(startedAt), updatedAt: RFC3339.format(now), running: running,
            queued: queued, published: summary.published, failed: summary.failed, rejected: summary.rejected)
        daemon.hooksRunning = hooksRunning
        daemon.hooksWaiting = hooksWaiting
        daemon.rate = rate
        if let rate, rate > 0, remaining > 0 { daemon.eta = Double(remaining) / rate }
        let report = StatusReport(daemon: daemon, tasks: tasks, morePending: morePending)
        do {
            try directory.writeAtomically(fileName, SpoolJSON.encode(report))
            warnedWriteFailure = false
        } catch {
            if !warnedWriteFailure { logger.warning("could not write the status report: \(error)") }
            warnedWriteFailure = true
        }
        lastWrite = now
        dirty = false
    }

    /// One item as `spoolfetch status` shows it. `progress` is the running transfer's, if any.
    static func task(_ record: ItemRecord, now: Date, progress: (bytes: Int64, total: Int64?)?,
                     window: DailyWindow?) -> TaskStatus {
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
            } else if record.item.discretionary, let window, !window.contains(now, in: .current) {
                state = "waiting-window"
            }
        case .running:
            if let progress {
                bytes = progress.bytes
                expected = progress.total ?? expected
            }
            record.rateWindow.add(bytes: bytes, at: now)
            rate = record.rateWindow.rate
            eta = record.rateWindow.eta(total: expected, bytes: bytes)
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

    /// At exit: the report goes with the daemon.
    func remove() { directory.remove(fileName) }
}
