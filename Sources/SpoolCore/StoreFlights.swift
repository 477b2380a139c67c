import Foundation

/// This worker's fetches for the content store (`StoreExecutor`), by digest: which item runs
/// each, whether it holds the digest's spool-wide claim, whether its body is already on its way
/// into the store, and when its claim was last renewed. Bookkeeping only: the claim itself is
/// taken, renewed and released by the executor through its ports, so that a claim is let go in
/// one place (`StoreExecutor.endFlight`) and no claim of this process outlives its fetch.
public struct StoreFlights<Key: Hashable> {
    /// A fetch of this worker for a digest, by the item that runs it.
    public struct Flight {
        public let key: Key
        /// `REQUEST#INDEX` of the fetching item (what a waiter's status names).
        public let item: String
        /// Its body is published; the ingest is under way (waiters wait for that, not for the item).
        public var ingesting = false
        /// Claimed on the spool (released when the flight ends).
        public var claimed: Bool
        public var refreshedAt: Date
    }

    private var byDigest: [String: Flight] = [:]

    public init() {}

    public subscript(digest: String) -> Flight? { byDigest[digest] }

    /// The digests in flight, sorted: a check walks them in the same order every time (the
    /// simulator replays a seed exactly).
    public var digests: [String] { byDigest.keys.sorted() }

    public var isEmpty: Bool { byDigest.isEmpty }

    /// Whether a flight still fetches (not only ingests): its claim needs renewing.
    public var anyFetching: Bool { byDigest.contains { !$0.value.ingesting } }

    /// Item `key` fetches `digest` (claimed on the spool or not).
    mutating func begin(_ digest: String, key: Key, item: String, claimed: Bool, now: Date) {
        byDigest[digest] = Flight(key: key, item: item, claimed: claimed, refreshedAt: now)
    }

    /// Item `key`'s body of `digest` goes into the store: true when it is that flight's (which
    /// then waits for the ingest), false for another item's body of the digest.
    mutating func ingesting(_ digest: String, by key: Key) -> Bool {
        guard byDigest[digest]?.key == key else { return false }
        byDigest[digest]?.ingesting = true
        return true
    }

    /// The flight of `digest` ends; returned so that its claim can go.
    mutating func end(_ digest: String) -> Flight? { byDigest.removeValue(forKey: digest) }

    /// The flight's claim was renewed at `now`.
    mutating func refreshed(_ digest: String, now: Date) { byDigest[digest]?.refreshedAt = now }
}
