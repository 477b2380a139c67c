import Foundation

/// A host that could not be reached: nothing of it starts except one probe at a time, on its own
/// capped back-off, until a probe (or any transfer of the host) reaches it again.
///
/// What `status` shows for a waiting host: since when, the last error, when the next probe goes.
public struct HostOutage: Sendable, Hashable {
    /// "host:port", as in `ScheduledItem.hostKey`.
    public let hostKey: String
    /// When the first failure to reach it was reported.
    public let since: Date
    /// The last failure to reach it, as the engine described it.
    public var lastError: String
    /// Failures to reach it so far (the first one included); drives the probe back-off.
    public var failures: Int
    /// When the next probe may start (a probe already running: when the one after it may).
    public var nextProbe: Date
    /// The item whose transfer is the probe running now, if any.
    public var probe: ItemKey?

    public init(hostKey: String, since: Date, lastError: String, failures: Int, nextProbe: Date, probe: ItemKey?) {
        self.hostKey = hostKey
        self.since = since
        self.lastError = lastError
        self.failures = failures
        self.nextProbe = nextProbe
        self.probe = probe
    }
}

extension Scheduler {
    // MARK: Outages

    /// Hosts that could not be reached, for status.
    public var hostOutages: [HostOutage] {
        outages.values.sorted { $0.hostKey < $1.hostKey }
    }

    /// Whether the running item `key` was started as its host's probe. The engine needs this to
    /// know that the item's failure to reach the host is the probe's, and to say so in its log.
    public func isProbe(_ key: ItemKey) -> Bool {
        guard let entry = running[key] else { return false }
        return outages[hostKey(of: entry)]?.probe == key
    }

    /// A transfer to `hostKey` failed without reaching it (an outage, see
    /// `TransferFailureKind.outage`). The host is held: its items wait, using no attempt, and one
    /// probe starts at a time on the probe back-off (`SchedulerConfiguration.probeBackoff`).
    ///
    /// - Parameters:
    ///   - failedItem: the running item whose transfer failed; it goes back to the ready queue in
    ///     its original order (the engine must not also call `retry` for it).
    ///   - jitter: a random number in 0...1 (spreads the probes of many hosts).
    /// The back-off grows only when a probe (or the first failure) fails; items of the host that
    /// were already running when it went down fail one after another without pushing it further.
    public mutating func hostUnreachable(_ hostKey: String, failedItem: ItemKey?, now: Date, error: String,
                                         jitter: Double = Double.random(in: 0...1)) {
        // Only the probe's failure (or the first one) pushes the next probe further.
        let counts = outages[hostKey].map { failedItem != nil && $0.probe == failedItem } ?? true
        hostStrained(hostKey, now: now.timeIntervalSince1970, why: "connections refused or reset")
        if let key = failedItem, let entry = running.removeValue(forKey: key) {
            releaseSlot(entry)
            insertReady(entry)
        }
        var outage = outages[hostKey]
            ?? HostOutage(hostKey: hostKey, since: now, lastError: error, failures: 0, nextProbe: now, probe: nil)
        outage.lastError = error
        if failedItem != nil, outage.probe == failedItem { outage.probe = nil }
        if counts {
            outage.failures += 1
            let delay = configuration.probeBackoff.delay(afterAttempt: outage.failures, jitter: jitter)
            outage.nextProbe = now.addingTimeInterval(delay)
        }
        outages[hostKey] = outage
    }

    /// Something of `hostKey` answered (a probe's response began, or any transfer of it got a
    /// response, even an error status): its waiting items may start at once. Returns the outage
    /// that ended, for the log line ("back after …"); nil when the host was not held.
    @discardableResult
    public mutating func hostReachable(_ hostKey: String) -> HostOutage? {
        outages.removeValue(forKey: hostKey)
    }

    /// The network changed (a route or an address appeared): every held host is probed at once
    /// instead of at its next back-off step. Returns the hosts made due.
    @discardableResult
    public mutating func probeNow(_ now: Date) -> [String] {
        var due: [String] = []
        for (host, outage) in outages where outage.probe == nil && outage.nextProbe > now {
            outages[host]!.nextProbe = now
            due.append(host)
        }
        return due.sorted()
    }

    /// Whether a held host lets one more item start now (only as its probe).
    func outageAllowsStart(_ host: String, now: Double) -> Bool {
        guard let outage = outages[host] else { return true }
        return outage.probe == nil && outage.nextProbe.timeIntervalSince1970 <= now
    }

    /// The earliest probe due among held hosts that have an item waiting to be the probe.
    func nextProbeDue() -> Double? {
        var next: Double? = nil
        for (host, outage) in outages where outage.probe == nil {
            guard (ready[host]?.count ?? 0) > 0 || (readyDiscretionary[host]?.count ?? 0) > 0 else { continue }
            let t = outage.nextProbe.timeIntervalSince1970
            next = min(next ?? t, t)
        }
        return next
    }

    /// A probe's item left the running set without an outage report (paused, cancelled,
    /// finished): another item may probe in its place.
    mutating func releaseProbe(_ key: ItemKey, host: String) {
        if outages[host]?.probe == key { outages[host]!.probe = nil }
    }
}

/// Why nothing starts to a host now, for status: an item that waits on its host names it.
public enum HostWait: Sendable, Hashable {
    /// The host could not be reached; nothing but its probe starts until it answers again.
    case unreachable(HostOutage)
    /// The host asked to be left alone (a 429/503 with `Retry-After`, or its pace): until then.
    case backedOff(until: Date)
}

extension Scheduler {
    /// What holds `hostKey` back at `now`, if anything: an outage first, then a back-off.
    public func hostWait(_ hostKey: String, now: Date) -> HostWait? {
        if let outage = outages[hostKey] { return .unreachable(outage) }
        let t = now.timeIntervalSince1970
        let until = max(hostHolds[hostKey] ?? 0, paces[hostKey]?.holdUntil ?? 0)
        return until > t ? .backedOff(until: Date(timeIntervalSince1970: until)) : nil
    }
}
