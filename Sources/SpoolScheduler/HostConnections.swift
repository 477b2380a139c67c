/// The connections the running transfers hold, per host and in all, by what each host speaks.
///
/// `--per-host` and `--concurrency` count connections, not requests: over HTTP/1.1 every running
/// transfer holds a connection of its own, while over HTTP/2 a host's transfers are streams of
/// one connection (libcurl multiplexes them; `PIPEWAIT` makes the first ones wait for it). So a
/// host known to multiplex takes up to `streams` transfers at once, as one connection. A host is
/// taken for HTTP/1.1 until one of its responses says otherwise.
struct HostConnections: Sendable {
    /// Running transfers per host.
    private(set) var transfers: [String: Int] = [:]
    /// Hosts whose last response came over a multiplexing protocol (HTTP/2 or later).
    private var multiplexing: Set<String> = []
    /// Connections of their own that segmented items hold besides their transfer's, per host.
    private var dedicated: [String: Int] = [:]
    /// Connections held by all running transfers.
    private(set) var total = 0
    /// Streams one connection carries at once (`--max-streams`).
    var streams: Int

    init(streams: Int) { self.streams = max(1, streams) }

    func multiplexes(_ host: String) -> Bool { multiplexing.contains(host) }

    /// Connections `n` transfers to `host` hold.
    private func connections(_ host: String, _ n: Int) -> Int {
        guard n > 0 else { return 0 }
        return multiplexing.contains(host) ? (n + streams - 1) / streams : n
    }

    /// Connections to `host`: its transfers' and its segments'.
    func connections(to host: String) -> Int {
        connections(host, transfers[host] ?? 0) + (dedicated[host] ?? 0)
    }

    /// Whether one more transfer to `host` stays within `perHost` connections (HTTP/1.1) or one
    /// connection's streams (HTTP/2).
    func hostHasRoom(_ host: String, perHost: Int) -> Bool {
        let n = transfers[host] ?? 0
        if multiplexing.contains(host) && n >= streams { return false }
        return connections(to: host) + added(by: host) <= perHost
    }

    /// Segment connections of `host` changed by `delta`.
    mutating func dedicate(_ host: String, _ delta: Int) {
        let n = (dedicated[host] ?? 0) + delta
        dedicated[host] = n > 0 ? n : nil
        total += delta
    }

    /// Connections one more transfer to `host` opens: 0 for a stream on a connection with room.
    func added(by host: String) -> Int {
        let n = transfers[host] ?? 0
        return connections(host, n + 1) - connections(host, n)
    }

    mutating func add(_ host: String) {
        total += added(by: host)
        transfers[host, default: 0] += 1
    }

    mutating func remove(_ host: String) {
        let n = transfers[host] ?? 0
        guard n > 0 else { return }
        total -= connections(host, n) - connections(host, n - 1)
        transfers[host] = n > 1 ? n - 1 : nil
    }

    /// What a response of `host` said about its protocol. Returns whether that changed anything.
    @discardableResult
    mutating func learn(_ host: String, multiplexes: Bool) -> Bool {
        guard multiplexes != multiplexing.contains(host) else { return false }
        let n = transfers[host] ?? 0
        total -= connections(host, n)
        if multiplexes { multiplexing.insert(host) } else { multiplexing.remove(host) }
        total += connections(host, n)
        return true
    }

    /// A new `--max-streams` (a reload): the running transfers are counted again.
    mutating func setStreams(_ value: Int) {
        streams = max(1, value)
        total = transfers.reduce(0) { $0 + connections($1.key, $1.value) } + dedicated.values.reduce(0, +)
    }
}
