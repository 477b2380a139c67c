import Foundation

/// Connections that segmented items hold besides their own transfer's (see the README,
/// "Segmented transfers"): counted against `perHost` and `concurrency` like any other, and
/// given only where no waiting item of the host needs them.
extension Scheduler {
    /// How many more connections a running item of `hostKey` may open for segments, at most
    /// `limit`: the host's free connections less those its waiting items need (over HTTP/2
    /// they need none while its connection has streams free), within `concurrency` less the
    /// slots that waiting items of other hosts would take now.
    public func spareConnections(forHost hostKey: String, upTo limit: Int) -> Int {
        let waiting = hostHasWaiting(hostKey) && !connections.multiplexes(hostKey) ? (ready[hostKey]?.count ?? 0) : 0
        let hostSpare = configuration.perHost - connections.connections(to: hostKey) - waiting
        let othersWaiting = ready.keys.reduce(0) { $1 == hostKey ? $0 : $0 + waitingForConnections($1) }
        let globalSpare = configuration.concurrency - connections.total - othersWaiting
        return max(0, min(limit, hostSpare, globalSpare))
    }

    /// Whether waiting items of `host` would start now on a new connection: not when the host is
    /// held (`Retry-After`, an outage), paced, or its waiting items need no new connection
    /// (streams of an HTTP/2 connection).
    func startsOnNewConnections(_ host: String) -> Bool {
        let now = decidedAt
        return !(ready[host]?.isEmpty ?? true) && connections.added(by: host) > 0 && (hostHolds[host].map({ $0 <= now }) ?? true)
            && outageAllowsStart(host, now: now) && paceAllowsStart(host, now: now)
    }

    /// Items of `host` that a free slot of `concurrency` would start now: its waiting items, up
    /// to its free connections.
    func waitingForConnections(_ host: String) -> Int {
        guard startsOnNewConnections(host) else { return 0 }
        return min(ready[host]?.count ?? 0, max(0, connectionLimit(host) - connections.connections(to: host)))
    }

    /// Fair shares: how many segment connections the running item `key` may keep now. All it
    /// holds while the items that wait for a start fit in the connections still free; else
    /// segmented items give back as many as those items lack, the one holding most first (ties:
    /// the later key), so an item never waits behind another's extra segments — first what the
    /// waiting items of its own host lack (the host's limit, and `concurrency`), then the slots of
    /// `concurrency` that waiting items of other hosts lack. Items that could not start for
    /// another reason (a host held by `Retry-After` or an outage, paced by its rate limit, or
    /// waiting items that need no new connection: streams of an HTTP/2 connection) take nothing.
    public func segmentConnectionsAllowed(_ key: ItemKey) -> Int {
        guard let entry = running[key], let held = segmentConnections[key], held > 0 else { return 0 }
        let host = hostKey(of: entry)
        var holders = segmentConnections.filter { k, n in n > 0 && running[k] != nil }
        var globalFree = max(0, configuration.concurrency - connections.total)
        /// One at a time from the largest holder among `among`, until `lack` is met.
        func giveBack(_ lack: Int, among: (ItemKey) -> Bool) {
            var lack = lack
            while lack > 0, let (most, n) = holders.filter({ among($0.key) }).max(by: { ($0.value, $0.key) < ($1.value, $1.key) }),
                  n > 0 {
                holders[most] = n - 1
                lack -= 1
            }
        }
        if startsOnNewConnections(host) {
            let waiting = ready[host]?.count ?? 0
            let free = max(0, min(connectionLimit(host) - connections.connections(to: host), globalFree))
            globalFree -= min(waiting, free)
            giveBack(waiting - free) { k in self.running[k].map { self.hostKey(of: $0) == host } ?? false }
        }
        let othersLack = ready.keys.reduce(0) { $1 == host ? $0 : $0 + waitingForConnections($1) } - globalFree
        giveBack(othersLack) { _ in true }
        return holders[key] ?? held
    }

    /// Whether items of `hostKey` wait for a start now (not for a time).
    public func hostHasWaiting(_ hostKey: String) -> Bool {
        !(ready[hostKey]?.isEmpty ?? true)
    }

    /// A running item now holds `count` segment connections (0 when its segments ended).
    public mutating func setSegmentConnections(_ key: ItemKey, _ count: Int) {
        guard let entry = running[key] else { return }
        let old = segmentConnections[key] ?? 0
        guard count != old else { return }
        segmentConnections[key] = count > 0 ? count : nil
        connections.dedicate(hostKey(of: entry), count - old)
    }

    /// The item's slot is released: so are its segment connections.
    mutating func releaseSegments(_ entry: ReadyEntry) {
        guard let n = segmentConnections.removeValue(forKey: entry.key) else { return }
        connections.dedicate(hostKey(of: entry), -n)
    }
}
