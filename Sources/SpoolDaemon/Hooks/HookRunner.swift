import Foundation
import SpoolCore
import SpoolMetrics
import Logging
import SpoolConfiguration
import SpoolProcess
import Synchronization

/// Runs `--on-item` / `--on-group` commands through `/bin/sh -c`, off the engine thread, so that a
/// hook can never hang the daemon:
///
/// - at most `maxRunning` at once (`--max-hooks`); more wait in order of arrival;
/// - each in a process group of its own; past `timeout` (`--hook-timeout`) the whole group gets
///   SIGTERM, and SIGKILL `killGrace` seconds later, so a hook's children die with it;
/// - stdout and stderr are read line by line into log lines carrying the item id (stdout at
///   info, stderr at warning), never copied raw between the daemon's own lines;
/// - stdin is /dev/null; the daemon's other descriptors (locks, sockets) are not inherited.
///
/// `running` and `waiting` are for the status report; `waitForAll()` is for shutdown and drains.
final class HookRunner: Sendable {
    /// How a hook ended.
    typealias Outcome = HookProcess.Outcome

    /// Seconds between SIGTERM and SIGKILL past the time limit.
    static let killGrace = HookProcess.killGrace

    private struct Job: Sendable {
        var command: String
        var environment: [String: String]
        var item: String
        var capturesFirstLine = false
        /// `item`, `group` or `refresh`, for the metrics.
        var kind = "item"
        var completion: (@Sendable (Outcome, String?) -> Void)?
    }

    private struct State {
        var running = 0
        var queue: [Job] = []
        var timeout: Double
        var maxRunning: Int
    }

    private let state: Mutex<State>
    private let outstanding = DispatchGroup()
    private let logger: Logger
    /// Counts hook runs, failures and timeouts.
    private let metrics: DaemonMetrics?

    init(logger: Logger, timeout: Double, maxRunning: Int, metrics: DaemonMetrics? = nil) {
        self.metrics = metrics
        self.logger = logger
        state = Mutex(State(timeout: timeout, maxRunning: max(1, maxRunning)))
    }

    /// Hooks running now.
    var running: Int { state.withLock { $0.running } }
    /// Hooks waiting for a free slot.
    var waiting: Int { state.withLock { $0.queue.count } }

    /// New limits (a reload): a larger `maxRunning` starts waiting hooks at once; a new timeout
    /// applies to hooks started from now on.
    func update(timeout: Double, maxRunning: Int) {
        let start = state.withLock { s -> [Job] in
            s.timeout = timeout
            s.maxRunning = max(1, maxRunning)
            var started: [Job] = []
            while s.running < s.maxRunning, !s.queue.isEmpty {
                started.append(s.queue.removeFirst())
                s.running += 1
            }
            return started
        }
        for job in start { launch(job) }
    }

    /// Runs `command` for `item` (an id such as `nightly#3`, or a request name for a group hook);
    /// `completion` is called on the hook's thread once it has ended, however it ended.
    func run(_ command: String, environment: [String: String], item: String, kind: String = "item",
             completion: (@Sendable (Outcome) -> Void)? = nil) {
        var job = Job(command: command, environment: Self.absolutePaths(environment), item: item, kind: kind)
        if let completion {
            job.completion = { outcome, _ in completion(outcome) }
        }
        enqueue(job)
    }

    /// Runs a hook whose first stdout line is its answer (`--refresh-hook`): the line goes to
    /// `completion`, not to the log.
    func runForAnswer(_ command: String, environment: [String: String], item: String,
                      completion: @escaping @Sendable (Outcome, String?) -> Void) {
        enqueue(Job(command: command, environment: environment, item: item, capturesFirstLine: true, kind: "refresh",
                    completion: completion))
    }

    private func enqueue(_ job: Job) {
        outstanding.enter()
        let item = job.item
        let startNow = state.withLock { s -> Bool in
            if s.running < s.maxRunning { s.running += 1; return true }
            s.queue.append(job)
            return false
        }
        if startNow {
            launch(job)
        } else {
            logger.debug("hook waits for a free slot", metadata: ["item": "\(item)", "running": "\(running)"])
        }
    }

    /// The first form: the item id is taken from `SPOOLFETCH_ID`.
    func run(_ command: String, environment: [String: String], completion: (@Sendable () -> Void)? = nil) {
        run(command, environment: environment, item: environment["SPOOLFETCH_ID"] ?? "-") { _ in completion?() }
    }

    /// `SPOOLFETCH_PATH` and `SPOOLFETCH_MARKER` as absolute paths (a spool given as a relative
    /// path would otherwise hand the hook paths relative to the daemon's working folder).
    static func absolutePaths(_ environment: [String: String]) -> [String: String] {
        var out = environment
        let cwd = FileManager.default.currentDirectoryPath
        for key in ["SPOOLFETCH_PATH", "SPOOLFETCH_MARKER"] {
            if let path = out[key], !path.isEmpty, !path.hasPrefix("/") {
                out[key] = (cwd == "/" ? "" : cwd) + "/" + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
            }
        }
        return out
    }

    /// Blocks until every hook started or queued so far has ended (at shutdown, before a drain exits).
    func waitForAll() { outstanding.wait() }

    private func launch(_ job: Job) {
        let timeout = state.withLock { $0.timeout }
        let thread = Thread { [self] in
            let (outcome, firstLine) = HookProcess(command: job.command, environment: job.environment, item: job.item,
                                                   timeout: timeout, logger: logger,
                                                   capturesFirstLine: job.capturesFirstLine).runCapturing()
            report(outcome, of: job, timeout: timeout)
            let next = state.withLock { s -> Job? in
                if s.running <= s.maxRunning, !s.queue.isEmpty { return s.queue.removeFirst() }
                s.running -= 1
                return nil
            }
            if let next { launch(next) }
            job.completion?(outcome, firstLine)
            outstanding.leave()
        }
        thread.name = "spoolfetch-hook"
        thread.start()
    }

    private func report(_ outcome: Outcome, of job: Job, timeout: Double) {
        var failed = true, timedOut = false
        if case .exited(0) = outcome { failed = false }
        if case .timedOut = outcome { timedOut = true }
        metrics?.hookEnded(job.kind, failed: failed, timedOut: timedOut)
        let metadata: Logger.Metadata = ["item": "\(job.item)", "command": "\(job.command)"]
        switch outcome {
        case .exited(0): logger.debug("hook ended", metadata: metadata)
        case .exited(let status): logger.warning("hook failed", metadata: metadata.merging(["status": "\(status)"]) { $1 })
        case .signalled(let signal):
            logger.warning("hook killed by a signal", metadata: metadata.merging(["signal": "\(signal)"]) { $1 })
        case .timedOut:
            logger.error("hook killed past its time limit", metadata: metadata.merging(
                ["hook-timeout": "\(ConfigurationKey.formatNumber(timeout))"]) { $1 })
        case .couldNotStart(let why):
            logger.error("hook could not start", metadata: metadata.merging(["error": "\(why)"]) { $1 })
        }
    }
}
