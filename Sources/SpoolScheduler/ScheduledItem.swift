import Foundation

// The scheduler's vocabulary, apart from its state machine (`Scheduler`): what the engine hands
// it about an item and what it answers. Small and stable, so the engine's code can be read
// against these without the scheduler's internals.

/// Urgency of an item when transfer slots are scarce. Mirrors the request file's `priority`.
public enum SchedulingPriority: Int, Sendable, Comparable {
    case low = 0, normal = 1, high = 2
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// Opaque key the engine uses for an item; the scheduler never looks inside.
public typealias ItemKey = Int

/// What the scheduler needs to know about an item. Deliberately small: 100,000 of these may wait.
public struct ScheduledItem: Sendable, Hashable {
    public var key: ItemKey
    /// "host:port"; the unit of `perHost` limits and host back-off.
    public var hostKey: String
    public var priority: SchedulingPriority
    /// Seconds since 1970; nil means "now". Also the tie-breaker between equal priorities.
    public var earliestStart: Double?
    public var discretionary: Bool

    public init(key: ItemKey, hostKey: String, priority: SchedulingPriority = .normal,
                earliestStart: Date? = nil, discretionary: Bool = false) {
        self.key = key
        self.hostKey = hostKey
        self.priority = priority
        self.earliestStart = earliestStart?.timeIntervalSince1970
        self.discretionary = discretionary
    }
}

/// What the engine must do now.
public enum SchedulerAction: Sendable, Hashable {
    /// Start (or resume) the item's transfer. Its slot is counted from now on.
    case start(ItemKey)
    /// Stop the item's transfer and keep its partial; the scheduler has already put it back
    /// in the queue, so it will be started again later (resumed by the engine from its partial).
    case pause(ItemKey)
}
