import Foundation

/// The content store's shell rules (`--store`), in one owner for the daemon and the simulator
/// alike, each giving its own ports (`StorePorts`): the seeds check the rules the daemon runs,
/// not a copy of them. The decision itself is the pure `StoreDecision.decide`; this carries it
/// out and keeps what it needs between turns:
///
/// - this worker's fetches by digest and their claims (`StoreFlights`): a flight ends when its
///   own body's ingest is done (another item's body of the digest does not end it), when its item
///   leaves its running phase without the body, or at exit — and its claim goes with it;
/// - the items waiting for another's fetch, in the order they began (`StoreWaiters`): a waiter
///   gives its connection slot back (`park`); one that has to fetch queues for a slot again
///   (`unpark`) and decides anew once granted (`slotGranted`), as does a waiter whose hit failed;
/// - when the room checks next: every `checkInterval` while an item waits, every `leasePeriod`
///   while only fetches run (their claims renewed), at once after an ingest;
/// - a claim's loss: a claim is stale when its process is gone, or unchanged for `leaseTimeout`
///   (an unreadable one for `leasePeriod`) since this waiter first saw it — judged again on the
///   claim read just before it is broken, so that only that very claim is broken;
/// - the items published from the store (their marker says `source: "store"`; never ingested).
///
/// Engine thread only (the simulator's thread in tests).
public final class StoreExecutor<Ports: StorePorts> {
    public typealias Key = Ports.Key

    public struct Timing: Sendable {
        public var leasePeriod: Double
        public var leaseTimeout: Double
        public var checkInterval: Double
        public init(leasePeriod: Double, leaseTimeout: Double, checkInterval: Double) {
            self.leasePeriod = leasePeriod
            self.leaseTimeout = leaseTimeout
            self.checkInterval = checkInterval
        }
    }

    public let ports: Ports
    public let timing: Timing
    public internal(set) var flights = StoreFlights<Key>()
    public internal(set) var waiters = StoreWaiters<Key, Ports.Credentials, Ports.Holder>()
    /// Items published from the store and not ended yet.
    public internal(set) var fromStore: Set<Key> = []
    public internal(set) var nextCheck: Date?

    public init(ports: Ports, timing: Timing) {
        self.ports = ports
        self.timing = timing
    }

    // MARK: Deciding

    /// What the item does now that its transfer would start (`StoreDecision`), with the facts read now.
    public func decide(_ key: Key) -> StoreDecision {
        let digest = ports.digest(of: key)
        let present = digest.map { ports.entry($0) == .present } ?? false
        var localFetcher: String? = nil
        var claim: StoreDecision.Claim? = nil
        if let digest, !present {
            if let flight = flights[digest], flight.key != key {
                localFetcher = flight.item
            } else if flights[digest] == nil {
                claim = readClaim(digest, waiter: key)
            } else {
                claim = .own
            }
        }
        return StoreDecision.decide(digest: digest, storeOn: true, entryPresent: present, localFetcher: localFetcher, claim: claim)
    }

    private func readClaim(_ digest: String, waiter key: Key) -> StoreDecision.Claim {
        guard let holder = ports.claimHolder(digest) else { return .none }
        if holder.isMine { return .own }
        if isStale(holder, digest: digest, waiter: key) { return .stale(item: holder.item) }
        return .live(item: "\(holder.item) on \(holder.worker)")
    }

    private func isStale(_ holder: Ports.Holder, digest: String, waiter key: Key) -> Bool {
        if holder.isGone { return true }
        guard let wait = waiters[key], wait.digest == digest, let seen = wait.seen, seen == holder else { return false }
        return ports.monotonic - wait.seenSince >= (holder.isUnreadable ? timing.leasePeriod : timing.leaseTimeout)
    }

    // MARK: At an item's start

    /// The item's transfer would start: a hit or a wait (then nothing starts; a waiter gives its
    /// slot back), or its fetch, claimed first.
    public func startTransfer(_ key: Key, credentials: Ports.Credentials) {
        if !start(key, credentials: credentials) { ports.fetch(key, credentials: credentials) }
    }

    /// Decides and carries out a hit or a wait: true when it did, false when the item fetches.
    func start(_ key: Key, credentials: Ports.Credentials) -> Bool {
        for _ in 0..<3 {
            guard let digest = ports.digest(of: key) else { return false }
            switch decide(key) {
            case .hit:
                if hit(key, digest: digest, credentials: credentials) { return true }
                continue    // gone between the look and the read: decide again
            case .wait(let by, let elsewhere):
                wait(key, digest: digest, by: by, elsewhere: elsewhere, credentials: credentials)
                ports.park(key)
                return true
            case .fetch(let claim, let breaking):
                if !claim { return false }
                switch beginFetch(key, digest: digest, breaking: breaking, credentials: credentials) {
                case .fetch: return false
                case .waiting:
                    ports.park(key)
                    return true
                case .inStore: continue     // decide again: a hit now
                }
            }
        }
        return false
    }

    func hit(_ key: Key, digest: String, credentials: Ports.Credentials) -> Bool {
        guard ports.readHit(key, digest: digest, credentials: credentials) else { return false }
        waiters.stop(key)
        return true
    }

    enum FetchStart { case fetch, waiting, inStore }

    /// The item fetches `digest`: claimed on the spool first (breaking a stale claim). `waiting`
    /// when another worker claimed it in between; `inStore` when the entry arrived between the
    /// look and the claim (the claim is let go and the item decides again: a hit).
    func beginFetch(_ key: Key, digest: String, breaking: Bool, credentials: Ports.Credentials) -> FetchStart {
        // The claim as it is now, judged again: only that very claim is broken.
        if breaking, let seen = ports.claimHolder(digest), !seen.isMine, isStale(seen, digest: digest, waiter: key) {
            if ports.breakClaim(digest, seen: seen) {
                ports.note(.tookOverStaleClaim(key, digest: digest, holder: "\(seen.item) on \(seen.worker)"))
            }
        }
        var claimed = false
        switch ports.claim(digest, by: key) {
        case .claimed:
            claimed = true
        case .heldBy(let holder) where !holder.isMine:
            wait(key, digest: digest, by: "\(holder.item) on \(holder.worker)", elsewhere: true, credentials: credentials)
            return .waiting
        case .heldBy:
            // Its own claim, from an earlier start of this fetch (a retry): renewed now, as the
            // flight's renewal time restarts — else the claim could go unrenewed for longer than
            // a lease timeout while the flight's time says renewed, and be broken as stale.
            ports.refreshClaim(digest)
            claimed = true
        case .failed(let reason):
            ports.note(.claimFailed(key, reason: reason))
        }
        if ports.entry(digest) != .absent {
            if claimed { ports.releaseClaim(digest) }
            return .inStore
        }
        waiters.stop(key)
        flights.begin(digest, key: key, item: ports.name(of: key), claimed: claimed, now: ports.now)
        ports.note(.fetches(key, digest: digest, claimed: claimed))
        scheduleCheck(ports.now.addingTimeInterval(waiters.isEmpty ? timing.leasePeriod : timing.checkInterval))
        return .fetch
    }

    /// The item waits for the fetch `by` runs.
    func wait(_ key: Key, digest: String, by: String, elsewhere: Bool, credentials: Ports.Credentials) {
        if waiters[key] == nil {
            waiters.begin(key, .init(digest: digest, by: by, elsewhere: elsewhere, credentials: credentials,
                                     seen: elsewhere ? ports.claimHolder(digest) : nil, seenSince: ports.monotonic))
            ports.note(.waits(key, digest: digest, by: by))
        } else {
            waiters.fetched(key, by: by, elsewhere: elsewhere)
        }
        scheduleCheck(ports.now.addingTimeInterval(timing.checkInterval))
    }

    // MARK: Facts for the shell

    public func isWaiting(_ key: Key) -> Bool { waiters[key] != nil }
    /// The waiter has to fetch and is queued for a connection slot.
    public func awaitsSlot(_ key: Key) -> Bool { waiters.awaitsSlot(key) }
    /// Whether the item's body came from the store (its marker says `source: "store"`).
    public func servedFromStore(_ key: Key) -> Bool { fromStore.contains(key) }
    /// Items waiting for another's fetch, in order (a stop must reach them too).
    public var waitingKeys: [Key] { waiters.order }
    /// What `status` shows for a waiting item.
    public func waitDescription(_ key: Key) -> String? {
        waiters[key].map { "waiting for sha256:\($0.digest.prefix(12))… fetched by \($0.by)" }
    }

    // MARK: Endings

    /// The item left its running phase (stopped, paused, cancelled): it waits no more.
    public func forget(_ key: Key) { waiters.stop(key) }

    public func itemEnded(_ key: Key) {
        fromStore.remove(key)
        waiters.stop(key)
    }

    /// At exit: the claims of fetches that did not end go (another worker fetches at once
    /// instead of waiting out a lease).
    public func close() {
        for digest in flights.digests { endFlight(digest) }
    }

    func endFlight(_ digest: String) {
        guard let flight = flights.end(digest) else { return }
        if flight.claimed { ports.releaseClaim(digest) }
    }

    public func scheduleCheck(_ at: Date) {
        if nextCheck.map({ at < $0 }) ?? true { nextCheck = at }
    }
}
