import Foundation
import SpoolCore
import SpoolRequest
import SpoolScheduler

/// The content store (`--store`) in the simulation: what the spool holds of it — entries by
/// digest, and each digest's spool-wide claim with the worker process (incarnation) that holds it
/// — survives kills; a killed worker's claims stay behind, their holder gone (stale).
final class SimContentStore {
    var entries: Set<String> = []
    struct Claim: Equatable {
        let worker: String
        let incarnation: Int
        let item: Int
        /// Renewals so far: a renewed claim reads as another (its staleness counted anew).
        var renewed = 0
    }
    var claims: [String: Claim] = [:]
    /// Items published from the store (each must never have fetched in that start).
    var hits = 0
}

/// A claim as a simulated worker reads it: the same claim, unrenewed, reads equal.
struct SimClaimSeen: StoreClaimHolding {
    let claim: SimContentStore.Claim
    let isMine: Bool
    let isGone: Bool
    var isUnreadable: Bool { false }
    var item: String { "item \(claim.item)" }
    var worker: String { claim.worker }
    static func == (a: SimClaimSeen, b: SimClaimSeen) -> Bool { a.claim == b.claim }
}

/// A simulated worker's ports for the daemon's own `StoreExecutor` (the shell's rules of the
/// content store: flights, waiters and their order, the slot queue, checks, ingests' ends, stale
/// claims). The decision is the core's `StoreDecision.decide`, asked by the executor. Here are
/// only the simulated world's answers: the spool's entries and claims, the worker's scheduler,
/// its transfers, and a hit's read (answered 50 ms later in `storeTurn`; while faults are on,
/// one in ten finds the entry rotten and removes it). Left out: hashed mirrors, eviction, an
/// entry distrusted (one that could not be removed), a live holder's lease running out (a live
/// worker renews at every lease period), and the claims folder failing.
final class SimStorePorts: StorePorts {
    typealias Key = Int
    typealias Credentials = [RequestHeader]
    typealias Holder = SimClaimSeen

    /// Not owned: the worker owns the executor, which owns this.
    unowned let daemon: SimDaemon
    init(daemon: SimDaemon) { self.daemon = daemon }

    private var world: Simulation { daemon.world }
    private var store: SimContentStore { world.store! }
    /// Hits being read (the daemon's copy thread): the digest and when the read answers.
    var hitReads: [Int: (digest: String, at: Date)] = [:]

    func digest(of id: Int) -> String? { world.store != nil ? world.spec(id).digest : nil }
    func name(of id: Int) -> String { "item \(id)" }
    func isRunning(_ id: Int) -> Bool { daemon.machines[id]?.phase == .running }
    func keepsFetch(_ id: Int) -> Bool {
        let phase = daemon.machines[id]?.phase
        return phase == .running || phase == .publishing || phase == .waitingToPublish
    }

    func entry(_ digest: String) -> StoreEntryLook { store.entries.contains(digest) ? .present : .absent }

    private func seen(_ claim: SimContentStore.Claim) -> SimClaimSeen {
        SimClaimSeen(claim: claim, isMine: claim.incarnation == daemon.incarnation, isGone: !world.isLive(claim.incarnation))
    }

    func claimHolder(_ digest: String) -> SimClaimSeen? { store.claims[digest].map(seen) }

    func claim(_ digest: String, by id: Int) -> StoreClaimAnswer<SimClaimSeen> {
        if let holder = store.claims[digest] { return .heldBy(seen(holder)) }
        store.claims[digest] = SimContentStore.Claim(worker: daemon.name, incarnation: daemon.incarnation, item: id)
        return .claimed
    }

    func breakClaim(_ digest: String, seen: SimClaimSeen) -> Bool {
        guard store.claims[digest] == seen.claim else { return false }
        store.claims[digest] = nil
        return true
    }

    func releaseClaim(_ digest: String) {
        if store.claims[digest]?.incarnation == daemon.incarnation { store.claims[digest] = nil }
    }

    func refreshClaim(_ digest: String) {
        if store.claims[digest]?.incarnation == daemon.incarnation { store.claims[digest]?.renewed += 1 }
    }

    func fetch(_ id: Int, credentials: [RequestHeader]) { daemon.startFetch(id) }

    func readHit(_ id: Int, digest: String, credentials: [RequestHeader]) -> Bool {
        guard store.entries.contains(digest) else { return false }
        hitReads[id] = (digest, world.now.addingTimeInterval(0.05))
        world.log("item \(id): reads \(digest) from the store")
        return true
    }

    func park(_ id: Int) { daemon.scheduler.park(id) }
    func unpark(_ id: Int) { daemon.scheduler.unpark(id) }
    func isParked(_ id: Int) -> Bool { daemon.scheduler.isParked(id) }
    func slotUnused(_ id: Int) { daemon.scheduler.finished(id) }

    var now: Date { world.now }
    var monotonic: Double { world.now.timeIntervalSinceReferenceDate }
    func checkDue() {}

    func note(_ note: StoreNote<Int>) {
        switch note {
        case .waits(let id, let digest, let by): world.log("item \(id): waits for \(digest) fetched by \(by)")
        case .fetches(let id, let digest, let claimed): world.log("item \(id): fetches \(digest)\(claimed ? " (claimed)" : "")")
        case .tookOverStaleClaim(let id, let digest, let holder): world.log("item \(id): breaks the stale claim of \(holder) on \(digest)")
        case .claimFailed(let id, let reason): world.log("item \(id): could not claim: \(reason)")
        case .fetchEndedWithoutBody(let item, let digest): world.log("\(item): its fetch of \(digest) ended without the body; the next waiter fetches")
        case .queuesForSlot(let id, let digest): world.log("item \(id): its wait ended; queues for a connection to fetch \(digest)")
        }
    }
}

extension SimDaemon {
    /// The daemon checks every 0.2 s while an item waits; the simulation every 2 s (the answers
    /// are the same, taken later; a finer tick only spends steps).
    static let storeTiming = StoreExecutor<SimStorePorts>.Timing(leasePeriod: 30, leaseTimeout: 120, checkInterval: 2)

    /// Hits being read, kept by the worker's store ports (lost at a kill with the rest).
    var hitReads: [Int: (digest: String, at: Date)] {
        get { storeRoom.ports.hitReads }
        set { storeRoom.ports.hitReads = newValue }
    }

    /// The store's turn: hit reads answered (served, or a rotten entry removed and the item
    /// decides again), then the executor's timed check.
    func storeTurn() {
        guard let store = world.store else { return }
        for (id, read) in hitReads.sorted(by: { $0.key < $1.key }) where read.at <= world.now {
            hitReads.removeValue(forKey: id)
            guard machines[id]?.phase == .running else { continue }
            if world.faultsOn && world.sideChance(0.1, "hit \(id) \(world.trace.count)") {
                store.entries.remove(read.digest)
                world.log("item \(id): the store's entry \(read.digest) does not match its name: removed; decides again")
                storeRoom.hitFailed(id, credentials: [])
            } else {
                storeRoom.hitServed(id)
                store.hits += 1
                world.log("item \(id): published from the store (\(read.digest))")
                send(.partOpened(SimPart(item: id)), to: id)
                send(.transferEnded(TransferEnd(fault: nil, sha256: read.digest, hasPartial: true, wantedSHA256: read.digest)), to: id)
            }
        }
        storeRoom.check(now: world.now)
    }

    /// A publish succeeded: a body verified against its `sha256:` and not taken from the store goes
    /// in (the ingest can fail with faults on); the executor says whether it ends a flight.
    func storeIngest(_ id: Int) {
        guard let store = world.store, let digest = world.spec(id).digest,
              let endsFlight = storeRoom.published(id, digest: digest) else { return }
        if world.faultsOn && world.sideChance(0.1, "ingest \(id) \(world.trace.count)") {
            world.log("item \(id): could not put \(digest) into the store: EIO")
        } else if store.entries.insert(digest).inserted {
            world.log("item \(id): \(digest) put into the store")
        }
        storeRoom.ingested(digest: digest, flight: endsFlight ? id : nil)
    }

    /// A running item with no transfer has an exit through the store: it waits (parked, with a
    /// check timed) or has asked for a connection (queued in the scheduler, not parked).
    func storeHasExit(_ id: Int) -> Bool {
        guard world.store != nil else { return false }
        if storeRoom.awaitsSlot(id) { return scheduler.holds(id) && !scheduler.isParked(id) }
        guard storeRoom.isWaiting(id) else { return false }
        return scheduler.isParked(id) && storeRoom.nextCheck != nil
    }
}

extension Simulation {
    /// The store's invariants across both workers, after every step: a hit only from an entry
    /// present and never with a transfer; a transfer only with a connection slot held (not
    /// parked); at most one transfer of a digest at a time spool-wide; every claim of a live
    /// worker backed by that worker's fetch (a claim outliving its fetch would keep the other
    /// worker's waiters waiting for nothing); every flight's claim its own.
    func checkStore() -> String? {
        guard let store else { return nil }
        var fetching: [String: Int] = [:]
        for worker in workersForChecks {
            let room = worker.storeRoom
            for id in room.fromStore where worker.isTransferring(id) {
                return "\(worker.name): item \(id) was published from the store and fetches too"
            }
            for id in room.waitingKeys where worker.isTransferring(id) {
                return "\(worker.name): item \(id) waits for another fetch and fetches too"
            }
            for id in worker.machines.keys.sorted() where worker.isTransferring(id) {
                if !worker.scheduler.isRunning(id) {
                    return "\(worker.name): item \(id) fetches without a connection slot\(worker.scheduler.isParked(id) ? " (parked)" : "")"
                }
                guard let digest = spec(id).digest else { continue }
                if let other = fetching[digest] {
                    return "items \(other) and \(id) fetch \(digest) at once (\(worker.name) holds \(id))"
                }
                fetching[digest] = id
            }
            for digest in room.flights.digests {
                guard let flight = room.flights[digest], flight.claimed else { continue }
                if store.claims[digest]?.incarnation != worker.incarnation {
                    return "\(worker.name): item \(flight.key) fetches \(digest) without holding its claim"
                }
            }
        }
        for (digest, claim) in store.claims.sorted(by: { $0.key < $1.key }) {
            guard let holder = workersForChecks.first(where: { $0.incarnation == claim.incarnation }) else { continue }
            if holder.storeRoom.flights[digest] == nil {
                return "\(holder.name) holds the claim on \(digest) (item \(claim.item)) with no fetch of it"
            }
        }
        return nil
    }
}
