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
