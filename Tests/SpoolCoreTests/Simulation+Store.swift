import Foundation
import SpoolCore
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
    }
    var claims: [String: Claim] = [:]
    /// Items published from the store (each must never have fetched in that start).
    var hits = 0
    var fetchesStarted = 0
}

/// A worker's memory of the store, as `ContentStoreRoom` keeps it (lost at a kill): its fetches
/// by digest, the items waiting for one (in the order they began to wait), the waiters queued for
/// a connection to fetch with, the items published from the store, and when it checks next.
final class SimStoreRoom {
    var flights: [String: (item: Int, claimed: Bool)] = [:]
    var waiting: [Int: String] = [:]
    var waitOrder: [Int] = []
    var awaitingSlot: Set<Int> = []
    var fromStore: Set<Int> = []
    var checkAt: Date?
}

/// The shell's rules of `ContentStoreRoom` and `Engine+ContentStore.swift`, carried out on the
/// simulated spool; the decision itself is the core's `StoreDecision.decide`. Left out: hashed
/// mirrors, eviction, the copy thread (a hit's copy and hash are taken as done at once, and every
/// entry as matching its name: a rotten one is `VerifiedStoreHitTests`'), a live holder's lease
/// running out (a live worker always renews), and the claims folder failing.
extension SimDaemon {
    /// The daemon checks every 0.2 s while an item waits; the simulation every 2 s (the answers
    /// are the same, taken later; a finer tick only spends steps).
    static let storeCheckInterval: TimeInterval = 2
    /// `lease-period`: how often a worker with only fetches checks (and renews their claims).
    static let storeLeasePeriod: TimeInterval = 30

    private var store: SimContentStore { world.store! }

    func storeDigest(_ id: Int) -> String? { world.store != nil ? world.spec(id).digest : nil }

    /// The facts as `ContentStoreRoom.decide` reads them, and the core's answer.
    func storeDecide(_ id: Int) -> StoreDecision {
        let digest = storeDigest(id)
        let present = digest.map { store.entries.contains($0) } ?? false
        var localFetcher: String? = nil
        var claim: StoreDecision.Claim? = nil
        if let digest, !present {
            if let flight = room.flights[digest], flight.item != id {
                localFetcher = "item \(flight.item)"
            } else if room.flights[digest] == nil {
                claim = readClaim(digest)
            } else {
                claim = .own
            }
        }
        return StoreDecision.decide(digest: digest, storeOn: world.store != nil, entryPresent: present,
                                    localFetcher: localFetcher, claim: claim)
    }

    private func readClaim(_ digest: String) -> StoreDecision.Claim {
        guard let holder = store.claims[digest] else { return .none }
        if holder.incarnation == incarnation { return .own }
        if !world.isLive(holder.incarnation) { return .stale(item: "item \(holder.item)") }
        return .live(item: "item \(holder.item) on \(holder.worker)")
    }

    /// `ContentStoreRoom.start` at the item's `startTransfer`: true when a hit or a wait was
    /// carried out (no transfer starts), false when the item fetches (claimed first).
    func storeStart(_ id: Int) -> Bool {
        guard let digest = storeDigest(id) else { return false }
        for _ in 0 ..< 3 {
            switch storeDecide(id) {
            case .hit:
                if publishFromStore(id, digest: digest) { return true }
            case .wait(let by, _):
                storeWait(id, digest: digest, by: by)
                return true
            case .fetch(let claim, let breaking):
                if !claim { return false }
                switch beginFetch(id, digest: digest, breaking: breaking) {
                case .fetch: return false
                case .waiting: return true
                case .inStore: continue
                }
            }
        }
        return false
    }

    enum StoreFetchStart { case fetch, waiting, inStore }

    /// `ContentStoreRoom.beginFetch`: a stale claim broken, the digest claimed (or found held by
    /// another live worker: wait), the entry looked for once more, the flight recorded.
    func beginFetch(_ id: Int, digest: String, breaking: Bool) -> StoreFetchStart {
        if breaking, let seen = store.claims[digest], seen.incarnation != incarnation, !world.isLive(seen.incarnation) {
            store.claims[digest] = nil
            world.log("item \(id): breaks the stale claim of item \(seen.item) (\(seen.worker), gone) on \(digest)")
        }
        if let holder = store.claims[digest], holder.incarnation != incarnation {
            storeWait(id, digest: digest, by: "item \(holder.item) on \(holder.worker)")
            return .waiting
        }
        store.claims[digest] = SimContentStore.Claim(worker: name, incarnation: incarnation, item: id)
        if store.entries.contains(digest) {
            store.claims[digest] = nil
            return .inStore
        }
        stopWaiting(id)
        room.flights[digest] = (id, true)
        world.log("item \(id): fetches \(digest) (claimed)")
        scheduleStoreCheck(world.now.addingTimeInterval(room.waiting.isEmpty ? Self.storeLeasePeriod : Self.storeCheckInterval))
        return .fetch
    }

    func storeWait(_ id: Int, digest: String, by: String) {
        if room.waiting[id] == nil {
            room.waitOrder.append(id)
            room.waiting[id] = digest
            world.log("item \(id): waits for \(digest) fetched by \(by)")
        }
        scheduleStoreCheck(world.now.addingTimeInterval(Self.storeCheckInterval))
    }

    /// A hit: the body from the store's entry, handed to the machine as a complete, verified transfer.
    func publishFromStore(_ id: Int, digest: String) -> Bool {
        guard store.entries.contains(digest) else { return false }
        room.fromStore.insert(id)
        stopWaiting(id)
        store.hits += 1
        world.log("item \(id): published from the store (\(digest))")
        send(.partOpened(SimPart(item: id)), to: id)
        send(.transferEnded(TransferEnd(fault: nil, sha256: digest, hasPartial: true, wantedSHA256: digest)), to: id)
        return true
    }

    func stopWaiting(_ id: Int) {
        room.awaitingSlot.remove(id)
        guard room.waiting.removeValue(forKey: id) != nil else { return }
        room.waitOrder.removeAll { $0 == id }
    }

    /// `stopTransfer`: the item left its running phase; it waits no more.
    func storeForget(_ id: Int) { if world.store != nil { stopWaiting(id) } }

    func storeItemEnded(_ id: Int) {
        guard world.store != nil else { return }
        room.fromStore.remove(id)
        stopWaiting(id)
    }

    private func scheduleStoreCheck(_ at: Date) {
        if room.checkAt.map({ at < $0 }) ?? true { room.checkAt = at }
    }

    private func endFlight(_ digest: String) {
        guard let flight = room.flights.removeValue(forKey: digest) else { return }
        if flight.claimed, store.claims[digest]?.incarnation == incarnation { store.claims[digest] = nil }
    }

    /// A publish succeeded: a body verified against its `sha256:` and not taken from the store goes
    /// in (the ingest can fail with faults on); the digest's flight ends if it is this item's (an
    /// adopted item's body does not end another item's fetch), its waiters are checked now.
    func storeIngest(_ id: Int) {
        guard world.store != nil, let digest = storeDigest(id), !room.fromStore.contains(id) else { return }
        if world.faultsOn && world.sideChance(0.1, "ingest \(id) \(world.trace.count)") {
            world.log("item \(id): could not put \(digest) into the store: EIO")
        } else if store.entries.insert(digest).inserted {
            world.log("item \(id): \(digest) put into the store")
        }
        if room.flights[digest]?.item == id { endFlight(digest) }
        scheduleStoreCheck(world.now)
    }

    /// `ContentStoreRoom.check`: given-up flights end (claim released), each waiter decides again
    /// (one per digest goes on to fetch). Returns the waiters that go on.
    func storeCheck() -> [(Int, StoreDecision)] {
        guard world.store != nil, let due = room.checkAt, due <= world.now else { return [] }
        room.checkAt = nil
        for (digest, flight) in room.flights.sorted(by: { $0.key < $1.key }) {
            let phase = machines[flight.item]?.phase
            if phase != .running && phase != .publishing && phase != .waitingToPublish {
                world.log("item \(flight.item): its fetch of \(digest) ended without the body; the next waiter fetches")
                endFlight(digest)
            }
        }
        var goOn: [(Int, StoreDecision)] = []
        var fetchedNow: Set<String> = []
        for id in room.waitOrder {
            guard let digest = room.waiting[id], machines[id]?.phase == .running else {
                stopWaiting(id)
                continue
            }
            if fetchedNow.contains(digest) { continue }
            if room.awaitingSlot.contains(id) { fetchedNow.insert(digest); continue }
            let decision = storeDecide(id)
            switch decision {
            case .wait: break
            case .hit, .fetch: goOn.append((id, decision))
            }
            if case .fetch = decision { fetchedNow.insert(digest) }
        }
        if !room.waiting.isEmpty {
            scheduleStoreCheck(world.now.addingTimeInterval(Self.storeCheckInterval))
        } else if !room.flights.isEmpty {
            scheduleStoreCheck(world.now.addingTimeInterval(Self.storeLeasePeriod))
        }
        return goOn
    }

    /// `Engine.storeWaitEnded`: a parked waiter that has to fetch asks for a slot first.
    func storeWaitEnded(_ id: Int, _ decision: StoreDecision) {
        guard let digest = storeDigest(id), machines[id]?.phase == .running else { return }
        let parked = scheduler.isParked(id)
        switch decision {
        case .hit:
            if publishFromStore(id, digest: digest) { return }
            if parked { return askForSlot(id) }
            startFetch(id)
        case .fetch(_, let breaking):
            if parked { return askForSlot(id) }
            switch beginFetch(id, digest: digest, breaking: breaking) {
            case .fetch: startFetch(id)
            case .inStore: if !publishFromStore(id, digest: digest) { startFetch(id) }
            case .waiting: scheduler.park(id)
            }
        case .wait:
            scheduler.park(id)
        }
    }

    private func askForSlot(_ id: Int) {
        room.awaitingSlot.insert(id)
        world.log("item \(id): its wait ended; queues for a connection to fetch \(storeDigest(id) ?? "")")
        scheduler.unpark(id)
    }

    /// `Engine.storeSlotGranted`: the scheduler started a waiter that asked for a slot.
    func storeSlotGranted(_ id: Int) -> Bool {
        guard world.store != nil, room.awaitingSlot.remove(id) != nil else { return false }
        guard machines[id]?.phase == .running else {
            scheduler.finished(id)
            return true
        }
        storeWaitEnded(id, storeDecide(id))
        return true
    }

    /// A running item with no transfer has an exit through the store: it waits (parked, with a
    /// check timed) or has asked for a connection (queued in the scheduler, not parked).
    func storeHasExit(_ id: Int) -> Bool {
        guard world.store != nil, room.waiting[id] != nil else { return false }
        if room.awaitingSlot.contains(id) { return scheduler.holds(id) && !scheduler.isParked(id) }
        return scheduler.isParked(id) && room.checkAt != nil
    }
}

extension Simulation {
    /// The store's invariants across both workers, after every step: a hit only from an entry
    /// present and never with a transfer; at most one transfer of a digest at a time spool-wide;
    /// every claim of a live worker backed by that worker's fetch (a claim outliving its fetch
    /// would keep the other worker's waiters waiting for nothing); every flight's claim its own.
    func checkStore() -> String? {
        guard let store else { return nil }
        var fetching: [String: Int] = [:]
        for worker in workersForChecks {
            for id in worker.room.fromStore where worker.isTransferring(id) {
                return "\(worker.name): item \(id) was published from the store and fetches too"
            }
            for (id, _) in worker.room.waiting where worker.isTransferring(id) {
                return "\(worker.name): item \(id) waits for another fetch and fetches too"
            }
            for id in worker.machines.keys.sorted() where worker.isTransferring(id) {
                guard let digest = spec(id).digest else { continue }
                if let other = fetching[digest] {
                    return "items \(other) and \(id) fetch \(digest) at once (\(worker.name) holds \(id))"
                }
                fetching[digest] = id
            }
            for (digest, flight) in worker.room.flights where flight.claimed {
                if store.claims[digest]?.incarnation != worker.incarnation {
                    return "\(worker.name): item \(flight.item) fetches \(digest) without holding its claim"
                }
            }
        }
        for (digest, claim) in store.claims.sorted(by: { $0.key < $1.key }) {
            guard let holder = workersForChecks.first(where: { $0.incarnation == claim.incarnation }) else { continue }
            if holder.room.flights[digest] == nil {
                return "\(holder.name) holds the claim on \(digest) (item \(claim.item)) with no fetch of it"
            }
        }
        return nil
    }
}
