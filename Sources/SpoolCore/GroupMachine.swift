import Foundation

/// A request's group, from its claim to its group marker: how many of its items are still open,
/// and the end's write — the group marker and the request filed in `done/` or `failed/` — which
/// may fail and be tried again, or be let go. One entry, `handle`; its effects are carried out
/// by `GroupEndExecutor`, through the shell's group-end room or the simulator's ports.
///
/// A group end that fails keeps the claim and is tried again: letting go would leave the request
/// in this worker's folder with nobody working on it, until a later worker adopted it and
/// fetched everything again. Only a drain lets go, of an error retrying cannot fix; and a worker
/// whose request another took over (it stalled past its lease) lets go at once.
///
/// | phase | event | condition | next | effects |
/// |---|---|---|---|---|
/// | open(n) | taken | n = 0 (every item found ended) | ending | writeEnd |
/// | open(n) | taken | n > 0 | open(n) | — |
/// | open(n) | itemEnded | n > 1 | open(n − 1) | — |
/// | open(n) | itemEnded | n = 1 | ending | writeEnd |
/// | ending | endWritten | | ended | forget |
/// | ending | endFailed | another worker took the request over | abandoned | letGo(takenOver) |
/// | ending | endFailed | a drain, and retrying cannot help | abandoned | letGo(permanent) |
/// | ending | endFailed | otherwise | waitingToRetry | retry(at: now + retryDelay) |
/// | waitingToRetry | retryDue | | ending | writeEnd |
/// | any other | any | | unchanged | — |
public struct GroupMachine: Sendable, Hashable {
    public enum Phase: Sendable, Hashable {
        /// Items not ended yet (32 bits: a one-item request's record stays small).
        case open(items: Int32)
        /// The end is being written.
        case ending
        /// The end's write failed; it is tried again at the time `retry` said.
        case waitingToRetry
        /// The group marker is written and the request filed: the request is forgotten.
        case ended
        /// Let go without an end (it stays in `active/` for the next run, or for the worker that
        /// took it over).
        case abandoned
    }

    public enum Event: Sendable, Hashable {
        /// The request was taken in: each of its items has had its first event.
        case taken
        case itemEnded
        case endWritten
        case endFailed(GroupEndFault)
        case retryDue
    }

    public enum Effect: Sendable, Hashable {
        /// Write the group marker and file the request (the I/O queue).
        case writeEnd
        /// Forget the request, release its journals, run its group hook.
        case forget
        case retry(at: Date)
        case letGo(GroupLetGo)
    }

    /// How long a failed group end waits before it is tried again.
    public static let retryDelay: Double = 5

    public private(set) var phase: Phase

    /// A request whose `openItems` items have not ended (those a recovery found ended are not
    /// counted). Every item is counted before any is queued or recovered: a recovered item may
    /// end at once, and the group must not end before its later items are even known.
    public init(openItems: Int) {
        phase = .open(items: Int32(clamping: openItems))
    }

    public var openItems: Int {
        if case .open(let n) = phase { return Int(n) }
        return 0
    }

    @discardableResult
    public mutating func handle(_ event: Event, now: Date) -> [Effect] {
        switch (phase, event) {
        case (.open(0), .taken):
            phase = .ending
            return [.writeEnd]
        case (.open(let n), .itemEnded) where n > 1:
            phase = .open(items: n - 1)
            return []
        case (.open(let n), .itemEnded) where n == 1:
            phase = .ending
            return [.writeEnd]
        case (.ending, .endWritten):
            phase = .ended
            return [.forget]
        case (.ending, .endFailed(let fault)) where fault.takenOver:
            phase = .abandoned
            return [.letGo(.takenOver)]
        case (.ending, .endFailed(let fault)) where fault.inDrain && fault.permanent:
            phase = .abandoned
            return [.letGo(.permanent)]
        case (.ending, .endFailed):
            phase = .waitingToRetry
            return [.retry(at: now.addingTimeInterval(Self.retryDelay))]
        case (.waitingToRetry, .retryDue):
            phase = .ending
            return [.writeEnd]
        default:
            return []
        }
    }
}

/// Why a group end's write failed, as the shell classed its error.
public struct GroupEndFault: Sendable, Hashable {
    /// Another worker took the request over while this one stalled past its lease (fenced).
    public var takenOver: Bool
    /// Retrying cannot fix it (the claimed file is gone, a permission, …).
    public var permanent: Bool
    /// This run is a drain (`--once`, `--due`): it lets go of what it cannot end.
    public var inDrain: Bool

    public init(takenOver: Bool = false, permanent: Bool = false, inDrain: Bool = false) {
        self.takenOver = takenOver; self.permanent = permanent; self.inDrain = inDrain
    }
}

/// Why a group was let go without an end.
public enum GroupLetGo: Sendable, Hashable {
    case takenOver
    case permanent
}
