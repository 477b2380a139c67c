import Foundation

/// Connections that segmented items hold besides their own transfer's (see the README,
/// "Segmented transfers"): counted against `perHost` and `concurrency` like any other, and
/// given only where no waiting item of the host needs them.
extension Scheduler {
    /// How many more connections a running item of `hostKey` may open for segments, at most
    /// `limit`: the host's free connections less those its waiting items need (over HTTP/2
    /// they need none while its connection has streams free), within `concurrency`.
    public func spareConnections(forHost hostKey: String, upTo limit: Int) -> Int {
        let waiting = hostHasWaiting(hostKey) && !connections.multiplexes(hostKey) ? (ready[hostKey]?.count ?? 0) : 0
        let hostSpare = configuration.perHost - connections.connections(to: hostKey) - waiting
        let globalSpare = configuration.concurrency - connections.total
        return max(0, min(limit, hostSpare, globalSpare))
    }

    /// Fair shares: how many segment connections the running item `key` may keep now. All it
    /// holds while the items of its host that wait for a start fit in the connections still
    /// free (the host's limit, and `concurrency`); else the segmented items of the host give back
    /// as many as those items lack, the one holding most first (ties: the later key), so an item
    /// never waits behind another's extra segments. Items that could not start for another
    /// reason (a host held by `Retry-After` or an outage, paced by its rate limit, or waiting
    /// items that need no new connection: streams of an HTTP/2 connection) take nothing.
    public func segmentConnectionsAllowed(_ key: ItemKey) -> Int {
        guard let entry = running[key], let held = segmentConnections[key], held > 0 else { return 0 }
        let host = hostKey(of: entry)
        let waiting = ready[host]?.count ?? 0
        let now = decidedAt
        guard waiting > 0, connections.added(by: host) > 0, hostHolds[host].map({ $0 <= now }) ?? true,
              outageAllowsStart(host, now: now), paceAllowsStart(host, now: now) else { return held }
        let free = max(0, min(connectionLimit(host) - connections.connections(to: host),
                              configuration.concurrency - connections.total))
        var lack = waiting - free
        guard lack > 0 else { return held }
        // The host's segmented items, each giving back one at a time from the largest holder.
        var holders = segmentConnections.filter { k, n in n > 0 && running[k].map { hostKey(of: $0) == host } ?? false }
        while lack > 0, let (most, n) = holders.max(by: { ($0.value, $0.key) < ($1.value, $1.key) }), n > 0 {
            holders[most] = n - 1
            lack -= 1
        }
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
