import Foundation
import SpoolRequest
import SpoolStore

/// The items waiting for another item's fetch of their digest (`ContentStoreRoom`): what each
/// waits for, in the order they began to wait — the first of a digest's takes over a given-up
/// fetch — and which of them queue for a connection slot to fetch with. Bookkeeping only, apart
/// from the room so that the order and the slot queue change in one place; what a waiter does
/// next is the room's decision (`ContentStoreRoom.check`).
struct StoreWaiters {
    /// An item waiting for another's fetch of `digest`.
    struct Wait {
        let digest: String
        var by: String
        var elsewhere: Bool
        let credentials: [RequestHeader]
        /// The claim as last seen, and since when (by this process's monotonic clock) unchanged.
        var seen: StoreClaims.Holder?
        var seenSince: ContinuousClock.Instant
        let since: Date
    }

    private var waits: [Int: Wait] = [:]
    /// Waiting items in the order they began to wait.
    private(set) var order: [Int] = []
    /// Waiting items that have to fetch and wait for a connection slot (`awaitSlot`), with the
    /// credentials of their start: not decided again until the scheduler starts them.
    private var awaitingSlot: [Int: [RequestHeader]] = [:]

    var isEmpty: Bool { waits.isEmpty }

    subscript(key: Int) -> Wait? { waits[key] }

    /// `key` begins to wait (last in the order).
    mutating func begin(_ key: Int, _ wait: Wait) {
        order.append(key)
        waits[key] = wait
    }

    /// Who fetches what `key` waits for, as last decided.
    mutating func fetched(_ key: Int, by: String, elsewhere: Bool) {
        waits[key]?.by = by
        waits[key]?.elsewhere = elsewhere
    }

    /// The claim `key` waits on changed: its staleness is counted from now.
    mutating func saw(_ key: Int, _ holder: StoreClaims.Holder) {
        waits[key]?.seen = holder
        waits[key]?.seenSince = .now
    }

    /// `key` waits no more (nor for a slot).
    mutating func stop(_ key: Int) {
        awaitingSlot[key] = nil
        guard waits.removeValue(forKey: key) != nil else { return }
        order.removeAll { $0 == key }
    }

    /// The waiter has to fetch and queues for a connection slot (see `slotGranted`).
    mutating func awaitSlot(_ key: Int, credentials: [RequestHeader]) { awaitingSlot[key] = credentials }

    func awaitsSlot(_ key: Int) -> Bool { awaitingSlot[key] != nil }

    /// The scheduler started `key`: its credentials when it is a waiter that asked for a slot, else nil.
    mutating func slotGranted(_ key: Int) -> [RequestHeader]? { awaitingSlot.removeValue(forKey: key) }
}
