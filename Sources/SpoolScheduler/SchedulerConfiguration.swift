import Foundation

/// The limits the scheduler enforces.
public struct SchedulerConfiguration: Sendable, Hashable {
    /// Connections at once, for the whole daemon (an HTTP/2 connection counts once, however
    /// many streams it carries).
    public var concurrency: Int
    /// Connections at once to one host:port: its transfers over HTTP/1.1; over HTTP/2 its
    /// transfers share one connection as up to `maxStreams` streams.
    public var perHost: Int
    /// Streams at once on one HTTP/2 connection (libcurl's default, and below nginx's 128).
    public var maxStreams: Int
    /// When set, discretionary items run only inside it; when nil they run only when nothing
    /// else is waiting for a slot.
    public var window: DailyWindow?
    /// Whether a ready `high` item may pause a running `low` or discretionary one when no slot is free.
    public var highPreempts: Bool
    /// Back-off between probes of a host that could not be reached (an outage). Separate from the
    /// retry back-off of items: outages use no attempts. Default: 1 s doubling to 5 minutes.
    public var probeBackoff: Backoff
    /// Connections an HTTP/1.1 host may grow to while it gains throughput without strain
    /// (`HostConnectionLimit`); equal to `perHost`: no growth.
    public var perHostMax: Int

    public init(concurrency: Int = 16, perHost: Int = 6, maxStreams: Int = 100, window: DailyWindow? = nil,
                highPreempts: Bool = true, probeBackoff: Backoff = Backoff(base: 1, cap: 300), perHostMax: Int? = nil) {
        self.concurrency = max(1, concurrency)
        self.perHost = max(1, perHost)
        self.perHostMax = max(self.perHost, perHostMax ?? perHost)
        self.maxStreams = max(1, maxStreams)
        self.window = window
        self.highPreempts = highPreempts
        self.probeBackoff = probeBackoff
    }
}
