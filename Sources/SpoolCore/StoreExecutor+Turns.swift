import Foundation

/// What comes back to `StoreExecutor` after a start: a hit's read ended, a body published and
/// ingested, the room's timed check, a slot granted to a waiter that has to fetch.
extension StoreExecutor {
    // MARK: A hit's read ended

    /// The hit's bytes hashed to the digest: the item takes the body from the store.
    public func hitServed(_ key: Key) {
        fromStore.insert(key)
        waiters.stop(key)
    }

    /// The hit's read failed (a rotten or unreadable entry): the item decides again as if the
    /// store had no such entry. A waiter whose turn was a hit holds no slot (parked): it queues
    /// for one first and decides once it has it.
    public func hitFailed(_ key: Key, credentials: Ports.Credentials) {
        if ports.isParked(key) { return askForSlot(key, credentials: credentials) }
        startTransfer(key, credentials: credentials)
    }

    // MARK: Into the store

    /// Item `key`'s body of `digest` (verified against its `sha256:`) was published: nil when it
    /// is not ingested (taken from the store); else whether its ingest ends the digest's flight —
    /// only the fetch the body came from ends with its ingest: another item's body of the digest
    /// must not end that fetch, or its claim would go and the next item fetch it a second time.
    public func published(_ key: Key, digest: String) -> Bool? {
        guard !fromStore.contains(key) else { return nil }
        return flights.ingesting(digest, by: key)
    }

    /// An ingest answered: the flight it ends (`flight`, the fetching item) ends and its claim
    /// goes; the digest's waiters are checked now either way.
    public func ingested(digest: String, flight: Key?) {
        if let flight, flights[digest]?.key == flight { endFlight(digest) }
        scheduleCheck(ports.now)
    }

    // MARK: Checks

    /// The checks due at `now`: flights whose item gave up end (claim released), claims renewed,
    /// each waiter decided again (one per digest goes on to fetch) and carried out. Returns how
    /// many waiters went on.
    @discardableResult
    public func check(now: Date) -> Int {
        guard let due = nextCheck, due <= now else { return 0 }
        nextCheck = nil
        ports.checkDue()
        for digest in flights.digests {
            guard let flight = flights[digest], !flight.ingesting else { continue }
            if !ports.keepsFetch(flight.key) {
                ports.note(.fetchEndedWithoutBody(item: flight.item, digest: digest))
                endFlight(digest)
            } else if flight.claimed, now.timeIntervalSince(flight.refreshedAt) >= timing.leasePeriod {
                ports.refreshClaim(digest)
                flights.refreshed(digest, now: now)
            }
        }
        var goOn: [(Key, StoreDecision, Ports.Credentials)] = []
        var fetchedNow: Set<String> = []
        for key in waiters.order {
            guard let wait = waiters[key], ports.isRunning(key), ports.digest(of: key) != nil else {
                waiters.stop(key)
                continue
            }
            // One waiter per digest goes on to fetch: the others see its flight at the next check.
            if fetchedNow.contains(wait.digest) { continue }
            // Queued for a slot to fetch with: it decides again once it has one.
            if waiters.awaitsSlot(key) { fetchedNow.insert(wait.digest); continue }
            if wait.elsewhere, let seen = ports.claimHolder(wait.digest), seen != wait.seen { waiters.saw(key, seen, since: ports.monotonic) }
            let decision = decide(key)
            switch decision {
            case .wait(let by, let elsewhere):
                waiters.fetched(key, by: by, elsewhere: elsewhere)
            case .hit, .fetch:
                goOn.append((key, decision, wait.credentials))
            }
            if case .fetch = decision { fetchedNow.insert(wait.digest) }
        }
        // Waiters are checked often; fetches alone only need their claims renewed (and a given-up
        // fetch's claim released within a lease period), so an idle-ish worker wakes rarely.
        if !waiters.isEmpty {
            scheduleCheck(now.addingTimeInterval(timing.checkInterval))
        } else if flights.anyFetching {
            scheduleCheck(now.addingTimeInterval(timing.leasePeriod))
        }
        for (key, decision, credentials) in goOn { waitEnded(key, decision, credentials: credentials) }
        return goOn.count
    }

    /// A waiting item's turn came: published from the store, or fetched. A waiter holds no
    /// connection (parked): one that has to fetch asks for a slot first and goes on in
    /// `slotGranted`; one that waits again gives its slot back.
    func waitEnded(_ key: Key, _ decision: StoreDecision, credentials: Ports.Credentials) {
        guard let digest = ports.digest(of: key) else { return }
        let parked = ports.isParked(key)
        switch decision {
        case .hit:
            if hit(key, digest: digest, credentials: credentials) { return }
            if parked { return askForSlot(key, credentials: credentials) }
            ports.fetch(key, credentials: credentials)
        case .fetch(_, let breaking):
            if parked { return askForSlot(key, credentials: credentials) }
            switch beginFetch(key, digest: digest, breaking: breaking, credentials: credentials) {
            case .fetch:
                ports.fetch(key, credentials: credentials)
            case .inStore:
                if !hit(key, digest: digest, credentials: credentials) { ports.fetch(key, credentials: credentials) }
            case .waiting:
                ports.park(key)
            }
        case .wait(let by, let elsewhere):
            // Waits (again): one that had stopped waiting — its hit failed, and it queued for a
            // slot — waits anew, with a check timed; parked without, it would wait for ever.
            wait(key, digest: digest, by: by, elsewhere: elsewhere, credentials: credentials)
            ports.park(key)
        }
    }

    /// A parked waiter has to fetch: it queues for a connection like any item (still running,
    /// still shown waiting), and decides again once it has one.
    func askForSlot(_ key: Key, credentials: Ports.Credentials) {
        waiters.awaitSlot(key, credentials: credentials)
        ports.note(.queuesForSlot(key, digest: waiters[key]?.digest ?? ports.digest(of: key) ?? ""))
        ports.unpark(key)
    }

    /// The scheduler started `key`: true when it is a waiter that asked for a slot, which now
    /// decides again with the slot in hand (or gives it back when it runs no more); false for
    /// any other item.
    public func slotGranted(_ key: Key) -> Bool {
        guard let credentials = waiters.slotGranted(key) else { return false }
        guard ports.isRunning(key) else {
            ports.slotUnused(key)
            return true
        }
        waitEnded(key, decide(key), credentials: credentials)
        return true
    }
}
