import Foundation
import SpoolRequest
import SpoolScheduler
import SpoolStore

/// What `spoolfetch probe` (and `retry`'s hint toward it) asks of the engine: its held hosts,
/// who waits on them, and a probe now. The engine answers (`Engine+Probe.swift`); the control
/// room decides who may ask and what the answer says.
protocol HostProbing: AnyObject {
    /// The held hosts `host` names: `HOST:PORT` exactly, or `HOST` on any port.
    func outages(named host: String) -> [HostOutage]
    /// The owners of claimed requests with an item scheduled for `hostKey`.
    func owners(waitingOn hostKey: String) -> Set<uid_t>
    /// Makes `hostKey`'s probe due now (see `Scheduler.probeNow`).
    func probeNow(_ hostKey: String) -> (outage: HostOutage, madeDue: Bool)?
    /// The held host `record` waits on, if its host is held.
    func heldHost(of record: ItemRecord) -> String?
}

extension ControlHandler {
    /// `probe HOST`: each held host it names is probed now. Who may: root, the daemon's user, an
    /// operator, or a caller whose own claimed request waits on that host (a host belongs to no
    /// one; the requests behind it do). Answers what it did with each.
    func probe(_ host: String, caller: uid_t, hosts: HostProbing) -> ControlResult {
        let held = hosts.outages(named: host)
        guard !held.isEmpty else {
            return ControlResult(ok: false, message: "\(host) is not unreachable on this daemon (pid \(getpid())): nothing waits for "
                                 + "its probe; spoolfetch status lists unreachable hosts", items: [])
        }
        let groups = SpoolAccounts.groups(of: caller)
        var done: [String] = []
        var lines: [String] = []
        for outage in held {
            let key = outage.hostKey
            guard permission.actsForAll(caller: caller, callerGroups: groups)
                    || hosts.owners(waitingOn: key).contains(where: { permission.allows(caller: caller, callerGroups: groups, owner: $0) })
            else {
                return ControlResult(ok: false, message: "refused: no request of \(SpoolAccounts.userName(caller))'s waits on \(key); "
                                     + "root, the daemon's user \(SpoolAccounts.userName(permission.daemonUser))"
                                     + (permission.operators.map { " and the operators' group \(SpoolAccounts.groupName($0))" } ?? "")
                                     + " may probe any host", items: [], code: "not-owner")
            }
            guard let (before, madeDue) = hosts.probeNow(key) else { continue }
            let since = "unreachable since \(RFC3339.format(before.since)), \(before.failures) failure(s), last: \(before.lastError)"
            lines.append(madeDue ? "\(key) (\(since)) is probed now, not at \(RFC3339.format(before.nextProbe))"
                                 : "\(key) (\(since)) is being probed already")
            done.append(key)
        }
        return ControlResult(ok: !done.isEmpty, message: "probe: " + lines.joined(separator: "; "), items: done,
                             state: done.isEmpty ? nil : "unreachable")
    }

    /// For an item a `retry` could not start: its host is held, and `probe` is what moves it.
    func probeHint(_ record: ItemRecord, _ hosts: HostProbing) -> String {
        guard let host = hosts.heldHost(of: record) else { return "" }
        return ", waiting for its host \(host), which could not be reached: spoolfetch probe \(host) probes it now"
    }
}
