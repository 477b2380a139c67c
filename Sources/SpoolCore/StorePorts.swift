import Foundation

/// A digest's spool-wide claim as a worker reads it (the daemon's `StoreClaims.Holder`, the
/// simulator's claim record): equal only when it is the very same claim, unrenewed — a renewal
/// or a new holder makes it another, and a waiter counts its staleness from then.
public protocol StoreClaimHolding: Equatable {
    /// This worker process holds it.
    var isMine: Bool { get }
    /// Its holder's process is certainly gone: stale at once.
    var isGone: Bool { get }
    /// Its text names no process (a crash or power cut cut it short): stale after a lease period.
    var isUnreadable: Bool { get }
    /// `REQUEST#INDEX` of the item that fetches it, and its worker.
    var item: String { get }
    var worker: String { get }
}

/// What the store holds under a digest, as `StoreExecutor` asks it.
public enum StoreEntryLook: Sendable, Hashable {
    case absent
    case present
    /// There, but a hit found it rotten and could not remove it: taken as absent for a hit, yet
    /// present for the look after a claim (as the daemon always had it).
    case distrusted
}

/// A try to claim a digest on the spool.
public enum StoreClaimAnswer<Holder> {
    case claimed
    case heldBy(Holder)
    /// The claims folder is unusable: the item fetches anyway, without a claim (at worst twice).
    case failed(reason: String)
}

/// What the executor tells its ports' log (the daemon's logger, the simulator's trace).
public enum StoreNote<Key> {
    case waits(Key, digest: String, by: String)
    case fetches(Key, digest: String, claimed: Bool)
    case tookOverStaleClaim(Key, digest: String, holder: String)
    case claimFailed(Key, reason: String)
    /// A flight's item left its running phase without its body; the next waiter fetches.
    case fetchEndedWithoutBody(item: String, digest: String)
    case queuesForSlot(Key, digest: String)
}

/// The ports through which `StoreExecutor` reaches the world: the daemon's (`StoreShell`: the
/// item table, the store and its claims files, the copy thread, the scheduler, the engine's
/// fetch start) and the simulator's (`SimStorePorts`), each its own. `Key` names an item.
public protocol StorePorts: AnyObject {
    associatedtype Key: Hashable
    /// What an item's start carries to its fetch (the daemon's request headers).
    associatedtype Credentials
    associatedtype Holder: StoreClaimHolding

    // MARK: The items
    /// The digest the item would be stored under (a download's known `sha256:`); nil otherwise.
    func digest(of key: Key) -> String?
    /// `REQUEST#INDEX`, for waiters' status and logs.
    func name(of key: Key) -> String
    /// The item is in its running phase.
    func isRunning(_ key: Key) -> Bool
    /// The item may still bring the body of its fetch (running, publishing, waiting to publish).
    func keepsFetch(_ key: Key) -> Bool

    // MARK: The store and its claims
    func entry(_ digest: String) -> StoreEntryLook
    func claimHolder(_ digest: String) -> Holder?
    func claim(_ digest: String, by key: Key) -> StoreClaimAnswer<Holder>
    /// Breaks the claim `seen` (only that very claim); true when it was broken.
    func breakClaim(_ digest: String, seen: Holder) -> Bool
    func releaseClaim(_ digest: String)
    func refreshClaim(_ digest: String)

    // MARK: Starts
    /// The item's transfer starts from its sources (the store decided it fetches).
    func fetch(_ key: Key, credentials: Credentials)
    /// A hit: the entry's bytes read (and hashed) for the item, answered later through
    /// `StoreExecutor.hitServed` or `hitFailed`. False when it could not begin (the entry gone).
    func readHit(_ key: Key, digest: String, credentials: Credentials) -> Bool

    // MARK: The scheduler
    func park(_ key: Key)
    func unpark(_ key: Key)
    func isParked(_ key: Key) -> Bool
    /// A slot granted to an item that no longer runs goes back.
    func slotUnused(_ key: Key)

    // MARK: The clock and the log
    var now: Date { get }
    /// A monotonic clock in seconds (a claim's staleness is measured on it).
    var monotonic: Double { get }
    /// A check is due (the daemon saves its counters then).
    func checkDue()
    func note(_ note: StoreNote<Key>)
}
