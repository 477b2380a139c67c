import Foundation

/// How many connections an HTTP/1.1 host gets: `--per-host` at first, more while each added
/// connection adds throughput and the server shows no strain, up to `--per-host-max`; fewer on
/// strain. (An HTTP/2 host keeps its one connection with many streams: this limit is not used.)
///
/// Why: over HTTP/1.1 a connection carries one request at a time, so against a server tens of
/// milliseconds away a batch of small files is bounded by connections × round trips (six
/// connections: 500 × 16 KiB at 50 ms took 8 s, `aria2c -j16` 3.4 s). A fixed larger number would
/// be rude to a server that is already the bottleneck; measuring what each step adds is not.
///
/// The rules, each with a unit test (`HostConnectionLimitTests`): requests to the host are
/// measured in windows (at least `windowMinimum` seconds and twice the limit's completions, at
/// most `windowMaximum` seconds). At a window's end:
/// - **Rising response times** (the window's mean over `slower` × the best window's mean): one
///   connection fewer (not below `--per-host`).
/// - **Grow.** Items of the host waited, and the window's throughput (completions a second) is at
///   least `gain` × that of the window before the last step up (or there was none yet): half as
///   many connections more (at least `step`), up to `--per-host-max`. The window right after a step only settles (new
///   connections pay their handshakes in it) and is not judged.
/// - **A backlog steps to the ceiling.** When at least `backlogRounds` × `--per-host-max` items of
///   the host wait, the step goes straight to `--per-host-max`, judged like any other step (taken
///   back whole when it added too little). Why: stepping 6 → 9 → 13 → 16 took about 1.1 s of
///   windows, a third of a 500 × 16 KiB batch at 50 ms (issue 51's second round); a backlog that
///   keeps every connection busy for several round trips is what the wider step pays off for.
/// - **No gain.** The last step up added too little: it is taken back, and no step up is tried
///   for `holdAfterNoGain` seconds.
/// - **Strain.** A 429 or 503, a refused or reset connection: the limit halves (not below
///   `--per-host`), and no step up for `holdAfterStrain` seconds.
public struct HostConnectionLimit: Sendable, Hashable {
    public static let windowMinimum = 0.2
    public static let windowMaximum = 2.0
    public static let slower = 2.0
    public static let gain = 1.05
    public static let step = 2
    public static let holdAfterStrain = 30.0
    public static let holdAfterNoGain = 10.0
    public static let backlogRounds = 4

    /// Connections the host may have now.
    public internal(set) var limit: Int
    /// Why it is what it is, for status and the log.
    public internal(set) var reason: String
    let floor: Int
    let ceiling: Int
    var windowStart: Double
    var completions = 0
    var latencySum = 0.0
    /// Throughput of the window before the last step up; nil when no step is being judged.
    var rateBeforeStep: Double?
    /// The best window's mean response time.
    var bestLatency = Double.infinity
    var noStepUntil: Double = 0
    /// The window under way follows a step: it settles, and is not judged.
    var settling = false
    /// Connections the last step up added (taken back when it added no throughput).
    var lastStep = 0

    init(floor: Int, ceiling: Int, now: Double) {
        self.floor = max(1, floor)
        self.ceiling = max(self.floor, ceiling)
        limit = self.floor
        reason = "per-host"
        windowStart = now
    }

    /// A request of the host ended after `seconds`; `waiting`: whether items of the host wait for
    /// a connection, `backlog` how many. Returns whether the limit changed.
    mutating func completed(now: Double, seconds: Double, waiting: Bool, backlog: Int = 0) -> Bool {
        completions += 1
        latencySum += seconds
        let elapsed = now - windowStart
        guard elapsed >= Self.windowMaximum || (elapsed >= Self.windowMinimum - 1e-9 && completions >= 2 * limit) else { return false }
        let rate = Double(completions) / max(elapsed, 1e-6)
        let mean = latencySum / Double(completions)
        windowStart = now
        completions = 0
        latencySum = 0
        let before = limit
        if settling {
            settling = false
            return false
        }
        if mean > Self.slower * bestLatency {
            limit = max(floor, limit - 1)
            reason = "response times rising"
            rateBeforeStep = nil
        } else if let previous = rateBeforeStep, rate < Self.gain * previous {
            limit = max(floor, limit - lastStep)
            reason = "no more throughput"
            rateBeforeStep = nil
            noStepUntil = now + Self.holdAfterNoGain
        } else if waiting && limit < ceiling && now >= noStepUntil {
            rateBeforeStep = rate
            lastStep = backlog >= Self.backlogRounds * ceiling ? ceiling - limit : max(Self.step, limit / 2)
            limit = min(ceiling, limit + lastStep)
            reason = "throughput rising"
            settling = true
        } else {
            rateBeforeStep = nil
        }
        bestLatency = min(bestLatency, mean)
        return limit != before
    }

    /// The server shows strain (`why`). Returns whether the limit changed.
    mutating func strained(now: Double, why: String) -> Bool {
        let before = limit
        limit = max(floor, limit / 2)
        reason = why
        rateBeforeStep = nil
        noStepUntil = now + Self.holdAfterStrain
        windowStart = now
        completions = 0
        latencySum = 0
        return limit != before
    }
}

extension Scheduler {
    // MARK: Adaptive connections (HTTP/1.1)

    /// Hosts whose connection limit is adaptive (HTTP/1.1 hosts that ran something), for status.
    public var hostConnectionLimits: [String: HostConnectionLimit] { limits }

    /// Whether a host's limit changed since `takeHostLimitChanges` was last called (inlinable: the
    /// engine's loop asks at every wake-up, reading this one field).
    @inlinable public var hasHostLimitChanges: Bool { !limitChanges.isEmpty }

    /// Hosts whose limit changed since the last call, with the new limit and why (for the log).
    public mutating func takeHostLimitChanges() -> [(host: String, limit: Int, reason: String)] {
        defer { limitChanges.removeAll() }
        return limitChanges.sorted().compactMap { host in limits[host].map { (host, $0.limit, $0.reason) } }
    }

    /// Hosts with transfers running: connections held, the most allowed now and why, and the
    /// paced request rate (for status).
    public var busyHosts: [(host: String, connections: Int, limit: Int, why: String, pacedRate: Double?)] {
        connections.transfers.keys.sorted().map { host in
            let why = connections.multiplexes(host) ? "http/2" : limits[host]?.reason ?? "per-host"
            return (host, connections.connections(to: host), connectionLimit(host), why, paces[host]?.rate)
        }
    }

    /// Connections `host` may have now: its adaptive limit over HTTP/1.1, `perHost` otherwise.
    func connectionLimit(_ host: String) -> Int {
        guard !connections.multiplexes(host), configuration.perHostMax > configuration.perHost else { return configuration.perHost }
        return limits[host]?.limit ?? configuration.perHost
    }

    /// The host showed strain (429/503, a refused or reset connection): fewer connections.
    mutating func hostStrained(_ host: String, now: Double, why: String) {
        guard limits[host] != nil else { return }
        if limits[host]!.strained(now: now, why: why) { limitChanges.insert(host) }
    }

    /// Records when a transfer started, for its response time.
    mutating func noteStart(_ key: ItemKey, host: String, now: Double) {
        guard configuration.perHostMax > configuration.perHost else { return }
        startedAt[key] = now
        if limits[host] == nil {
            limits[host] = HostConnectionLimit(floor: configuration.perHost, ceiling: configuration.perHostMax, now: now)
        }
    }

    /// A transfer ended: measured at the next `nextActions` (the engine's clock).
    mutating func noteEnd(_ key: ItemKey, host: String, succeeded: Bool) {
        guard let started = startedAt.removeValue(forKey: key), succeeded else { return }
        endedSince.append((host, started))
    }

    /// The ends noted since the last call, measured at `now`.
    mutating func measureEnds(now: Double) {
        guard !endedSince.isEmpty else { return }
        for (host, started) in endedSince where limits[host] != nil && !connections.multiplexes(host) {
            let waiting = ready[host]?.count ?? 0
            if limits[host]!.completed(now: now, seconds: now - started, waiting: waiting > 0, backlog: waiting) {
                limitChanges.insert(host)
            }
        }
        endedSince.removeAll()
    }
}
