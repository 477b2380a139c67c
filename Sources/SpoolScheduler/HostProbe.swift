import Foundation

extension Scheduler {
    /// `spoolfetch probe HOST`: the held host `hostKey` is probed at once instead of at its next
    /// back-off step (as a network change does for every held host). Returns the outage as it was
    /// before (nil: the host is not held), and whether a probe was made due (false while one runs).
    public mutating func probeNow(_ hostKey: String, now: Date) -> (outage: HostOutage, madeDue: Bool)? {
        guard let outage = outages[hostKey] else { return nil }
        guard outage.probe == nil else { return (outage, false) }
        if outage.nextProbe > now { outages[hostKey]!.nextProbe = now }
        return (outage, true)
    }
}
