import Foundation

// The status and control files are spool file formats like the markers and records: the engine
// writes status/ and answers control/, the client reads status/ and writes control/. Here, below
// both, each side can import them without the client ever importing the engine.

/// One daemon's live state, written atomically to `status/HOST-PID.json` at most once a second
/// while anything changes (and not at all while idle), read by `spoolfetch status`.
public struct StatusReport: Codable, Sendable, Hashable {
    public var daemon: DaemonStatus
    public var tasks: [TaskStatus]
    /// Pending tasks left out of `tasks` (only the next `StatusReport.pendingShown` due are listed).
    public var morePending: Int

    /// How many waiting items a report lists: the next ones due. A report never lists a large
    /// batch whole; `DaemonStatus.states` counts every item.
    public static let pendingShown = 20

    public init(daemon: DaemonStatus, tasks: [TaskStatus], morePending: Int) {
        self.daemon = daemon
        self.tasks = tasks
        self.morePending = morePending
    }
}

/// Facts about the daemon that wrote a report.
public struct DaemonStatus: Codable, Sendable, Hashable {
    public var host: String
    public var pid: Int32
    public var version: String
    public var spool: String
    public var startedAt: String
    public var updatedAt: String
    public var running: Int
    public var queued: Int
    public var published: Int
    public var failed: Int
    public var rejected: Int
    /// Hooks running now and waiting for a slot (`HookRunner.running` / `.waiting`); a drain
    /// that has ended its items but still runs hooks shows them here.
    public var hooksRunning: Int? = nil
    public var hooksWaiting: Int? = nil
    /// Bytes per second received by all transfers together, over the daemon's moving window.
    public var rate: Double? = nil
    /// Seconds until every open item with a known or expected size (running and waiting) is
    /// done, at that rate.
    public var eta: Double? = nil
    /// Open items whose size is not known (no `expected-bytes`, no `Content-Length` yet): the
    /// ETA leaves them out, and says so.
    public var unknownSizes: Int? = nil
    /// The daemon-wide `--max-rate` in force, bytes per second (0: none); nil when no cap is set.
    public var maxRate: Int64? = nil
    /// When `--max-rate`'s schedule changes the rate next; nil for a constant rate.
    public var maxRateUntil: String? = nil
    /// Open items per state (`pending`, `waiting-start`, `waiting-window`, `running`, …). For a
    /// large queue the waiting states may be up to `StatusReporter.scanInterval` old.
    public var states: [String: Int]? = nil
    /// Trouble with a watched folder (lost and made again, or the watcher stopped), if any.
    public var watcher: String? = nil
    /// Hosts that could not be reached: their items wait (using no attempts) for a probe.
    public var unreachableHosts: [UnreachableHost]? = nil
    /// The content store's folder this daemon uses (`--store`); nil when the store is off.
    /// `spoolfetch store` without `--store` reads the store named here.
    public var store: String? = nil
    /// Hosts with transfers running: their connections, the most they may have now and why
    /// (adaptive over HTTP/1.1), and the request rate they are paced to (429/503, `RateLimit`).
    public var busyHosts: [BusyHost]? = nil
    /// Requests taken in whose items may start only after their URL expires (the last
    /// `StatusReporter.expiryWarningLimit`), one line each.
    public var urlExpiryWarnings: [String]? = nil
    /// Set by the reader, never by the daemon: seconds since `updatedAt` when the report was
    /// read, and whether it is stale — it says transfers run, yet the daemon, which rewrites it
    /// every second while they do, has not for `StatusReport.staleAfter` seconds (its file
    /// cannot be written, or the process is stopped).
    public var reportAgeSeconds: Int? = nil
    public var stale: Bool? = nil

    public init(host: String, pid: Int32, version: String, spool: String, startedAt: String,
                updatedAt: String, running: Int, queued: Int, published: Int, failed: Int, rejected: Int,
                hooksRunning: Int? = nil, hooksWaiting: Int? = nil, rate: Double? = nil, eta: Double? = nil,
                unknownSizes: Int? = nil, maxRate: Int64? = nil, maxRateUntil: String? = nil,
                states: [String: Int]? = nil, watcher: String? = nil,
                unreachableHosts: [UnreachableHost]? = nil, urlExpiryWarnings: [String]? = nil) {
        self.host = host
        self.pid = pid
        self.version = version
        self.spool = spool
        self.startedAt = startedAt
        self.updatedAt = updatedAt
        self.running = running
        self.queued = queued
        self.published = published
        self.failed = failed
        self.rejected = rejected
        self.hooksRunning = hooksRunning
        self.hooksWaiting = hooksWaiting
        self.rate = rate
        self.eta = eta
        self.unknownSizes = unknownSizes
        self.maxRate = maxRate
        self.maxRateUntil = maxRateUntil
        self.states = states
        self.watcher = watcher
        self.unreachableHosts = unreachableHosts
        self.urlExpiryWarnings = urlExpiryWarnings
    }
}

/// A host with transfers running (`status --json`): see `DaemonStatus.busyHosts`.
public struct BusyHost: Codable, Sendable, Hashable {
    /// `host:port`.
    public var host: String
    /// Connections its transfers hold now (an HTTP/2 connection once).
    public var connections: Int
    /// The most it may have now, and why (`per-host`, `throughput rising`, `no more
    /// throughput`, `response times rising`, `refused requests (429/503)`, `connections refused
    /// or reset`, `http/2`).
    public var limit: Int
    public var why: String
    /// Requests a second it is paced to, when it limits its clients' rate.
    public var pacedRate: Double?

    public init(host: String, connections: Int, limit: Int, why: String, pacedRate: Double? = nil) {
        self.host = host
        self.connections = connections
        self.limit = limit
        self.why = why
        self.pacedRate = pacedRate
    }
}

/// A host held because it could not be reached (`spoolfetch status` shows it).
public struct UnreachableHost: Codable, Sendable, Hashable {
    /// `host:port`.
    public var host: String
    public var since: String
    public var lastError: String
    /// Probes (and first failures) so far.
    public var failures: Int
    public var nextProbe: String

    public init(host: String, since: String, lastError: String, failures: Int, nextProbe: String) {
        self.host = host
        self.since = since
        self.lastError = lastError
        self.failures = failures
        self.nextProbe = nextProbe
    }
}

/// One item, as `spoolfetch status` shows it (URLSession's `getAllTasks`).
public struct TaskStatus: Codable, Sendable, Hashable {
    /// `REQUEST#INDEX`; `cancel`, `pause`, `resume` and `retry` take it (or just `REQUEST`).
    public var id: String
    public var request: String
    public var group: String
    public var name: String
    /// The URL without its query (which may carry tokens), unless the daemon keeps queries.
    public var url: String
    /// pending, waiting-start, waiting-window, waiting-space, running, retrying, paused,
    /// publishing, done, failed.
    public var state: String
    public var bytes: Int64
    public var expected: Int64?
    /// Bytes per second over the last status interval, while running.
    public var rate: Double?
    /// Seconds left at the current rate, when the size is known.
    public var eta: Double?
    public var attempts: Int
    public var error: String?
    public var startsAt: String?
    public var finishedAt: String?
    /// Connections its transfer uses now, when more than one (a segmented transfer).
    public var connections: Int? = nil
    /// What a `waiting-store` item waits for: `waiting for sha256:… fetched by REQUEST#INDEX` (`--store`).
    public var waitingFor: String? = nil
    /// The request's owner (the user whose file it was at claim): `status --wide` shows it.
    public var owner: String? = nil

    public init(id: String, request: String, group: String, name: String, url: String, state: String,
                bytes: Int64, expected: Int64? = nil, rate: Double? = nil, eta: Double? = nil, attempts: Int,
                error: String? = nil, startsAt: String? = nil, finishedAt: String? = nil,
                connections: Int? = nil) {
        self.id = id
        self.request = request
        self.group = group
        self.name = name
        self.url = url
        self.state = state
        self.bytes = bytes
        self.expected = expected
        self.rate = rate
        self.eta = eta
        self.attempts = attempts
        self.error = error
        self.startsAt = startsAt
        self.finishedAt = finishedAt
        self.connections = connections
    }
}

/// A command for a running daemon, dropped into `control/` by `spoolfetch cancel|pause|resume|retry`.
public struct ControlCommand: Codable, Sendable, Hashable {
    /// `probe` names a host, not a request: its outage's wait ends and its probe starts now.
    public enum Verb: String, Codable, Sendable, CaseIterable { case cancel, pause, resume, retry, probe }
    public var verb: Verb
    /// `REQUEST` (all its items) or `REQUEST#INDEX`; for `probe`, `HOST` or `HOST:PORT`.
    public var id: String
    /// `retry --deadline` of a request in `failed/` the daemon queues again for its producer: the
    /// retried items' deadline, in place of theirs.
    public var deadline: String? = nil

    public init(verb: Verb, id: String, deadline: String? = nil) {
        self.verb = verb
        self.id = id
        self.deadline = deadline
    }
}

/// The daemon's answer, `control/NAME.result`.
public struct ControlResult: Codable, Sendable, Hashable {
    public var ok: Bool
    public var message: String
    /// The item ids it acted on.
    public var items: [String]
    /// The state of the item (or request) the command was about, when the daemon says
    /// (`running`, `paused`, `done`, …): printed with the message.
    public var state: String? = nil
    /// Why it was refused, as a stable word, when it was: `not-owner` (the caller may act only
    /// on its own requests).
    public var code: String? = nil

    public init(ok: Bool, message: String, items: [String], state: String? = nil, code: String? = nil) {
        self.ok = ok
        self.message = message
        self.items = items
        self.state = state
        self.code = code
    }
}
