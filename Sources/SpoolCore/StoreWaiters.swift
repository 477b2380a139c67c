import Foundation

/// The items waiting for another item's fetch of their digest (`StoreExecutor`): what each
/// waits for, in the order they began to wait — the first of a digest's takes over a given-up
/// fetch — and which of them queue for a connection slot to fetch with. Bookkeeping only, so
/// that the order and the slot queue change in one place; what a waiter does next is the
/// executor's decision (`StoreExecutor.check`).
public struct StoreWaiters<Key: Hashable, Credentials, Holder: Equatable> {
    /// An item waiting for another's fetch of `digest`.
    public struct Wait {
        public let digest: String
        public var by: String
        public var elsewhere: Bool
        public let credentials: Credentials
        /// The claim as last seen, and since when (by a monotonic clock, in seconds) unchanged.
        public var seen: Holder?
        public var seenSince: Double
    }

    private var waits: [Key: Wait] = [:]
    /// Waiting items in the order they began to wait.
    public private(set) var order: [Key] = []
    /// Waiting items that have to fetch and wait for a connection slot (`awaitSlot`), with the
    /// credentials of their start: not decided again until the scheduler starts them.
    private var awaitingSlot: [Key: Credentials] = [:]

    public init() {}

    public var isEmpty: Bool { waits.isEmpty }

    public subscript(key: Key) -> Wait? { waits[key] }

    /// `key` begins to wait (last in the order).
    mutating func begin(_ key: Key, _ wait: Wait) {
        order.append(key)
        waits[key] = wait
    }

    /// Who fetches what `key` waits for, as last decided.
    mutating func fetched(_ key: Key, by: String, elsewhere: Bool) {
        waits[key]?.by = by
        waits[key]?.elsewhere = elsewhere
    }

    /// The claim `key` waits on changed: its staleness is counted from `since`.
    mutating func saw(_ key: Key, _ holder: Holder, since: Double) {
        waits[key]?.seen = holder
        waits[key]?.seenSince = since
    }

    /// `key` waits no more (nor for a slot).
    mutating func stop(_ key: Key) {
        awaitingSlot[key] = nil
        guard waits.removeValue(forKey: key) != nil else { return }
        order.removeAll { $0 == key }
    }

    /// The waiter has to fetch and queues for a connection slot (see `slotGranted`).
    mutating func awaitSlot(_ key: Key, credentials: Credentials) { awaitingSlot[key] = credentials }

    public func awaitsSlot(_ key: Key) -> Bool { awaitingSlot[key] != nil }

    /// The scheduler started `key`: its credentials when it is a waiter that asked for a slot, else nil.
    mutating func slotGranted(_ key: Key) -> Credentials? { awaitingSlot.removeValue(forKey: key) }
}
