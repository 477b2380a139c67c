import Foundation

/// What a drain (`run --due`, `run --once`) left when it exited: `status/last-drain-HOST.json`,
/// read by `spoolfetch status` when no daemon runs. In cron mode there is no daemon between runs,
/// so its live report (`StatusReport`) goes with it; without this record `status` could not say
/// why an item is still pending, nor which host the drain found down. Written atomically and
/// durably at the drain's exit by that worker, one per host (each host's cron drain owns its own);
/// any run on that host removes it when it starts (the live report then speaks, and the next
/// drain's exit writes a new one).
public struct DrainRecord: Codable, Sendable, Hashable {
    /// `HOST-PID` of the worker that wrote it, and its parts.
    public var worker: String
    public var host: String
    public var pid: Int32
    public var version: String
    /// `due` (`run --due`) or `once` (`run --once`).
    public var mode: String
    public var startedAt: String
    public var endedAt: String
    /// The drain's exit status (0, 1, 75: see the README's "Exit status") and what it means.
    public var exitStatus: Int32
    public var exitMeaning: String
    public var published: Int
    public var failed: Int
    public var rejected: Int
    /// Items still claimed and not ended when it exited, and of those the ones left for an
    /// unreachable host or for space (the reason for an exit 75).
    public var left: Int
    public var leftForHosts: Int
    public var leftForSpace: Int
    /// The hosts it found down; `nextProbe` is when it would have probed next had it gone on
    /// (no daemon probes after it exits: the next run tries them at its start).
    public var unreachableHosts: [UnreachableHost]
    /// The content store's folder the drain used, if any (`spoolfetch store` finds it here when
    /// no daemon runs).
    public var store: String? = nil
    /// The items it left, each with its state and reason (`waitingFor`, `error`) as its last
    /// report had them: those not just waiting and the next `StatusReport.pendingShown` due.
    /// Named apart from a live report's `tasks`, so that nothing takes this record for one.
    public var itemsLeft: [TaskStatus]
    /// Items left that `itemsLeft` does not list.
    public var moreLeft: Int

    public init(worker: String, host: String, pid: Int32, version: String, mode: String, startedAt: String,
                endedAt: String, exitStatus: Int32, exitMeaning: String, published: Int, failed: Int, rejected: Int,
                left: Int, leftForHosts: Int, leftForSpace: Int, unreachableHosts: [UnreachableHost],
                itemsLeft: [TaskStatus], moreLeft: Int) {
        self.worker = worker
        self.host = host
        self.pid = pid
        self.version = version
        self.mode = mode
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.exitStatus = exitStatus
        self.exitMeaning = exitMeaning
        self.published = published
        self.failed = failed
        self.rejected = rejected
        self.left = left
        self.leftForHosts = leftForHosts
        self.leftForSpace = leftForSpace
        self.unreachableHosts = unreachableHosts
        self.itemsLeft = itemsLeft
        self.moreLeft = moreLeft
    }

    /// `last-drain-HOST.json`: the record of the drains run on `host`.
    public static func fileName(host: String) -> String { "last-drain-\(host).json" }

    /// Whether a name in `status/` is a drain record (not a live report).
    public static func isRecord(_ name: String) -> Bool { name.hasPrefix("last-drain-") && name.hasSuffix(".json") }
}
