import Foundation
import SpoolScheduler
import SpoolStore

/// The engine's side of `spoolfetch probe`: the scheduler's held hosts, the requests waiting on
/// them (awake and dormant), a probe made due now. The next turn of the loop starts it.
extension Engine: HostProbing {
    func outages(named host: String) -> [HostOutage] { hosts.scheduler.hostOutages.filter { HostKeyMatch.names(host, $0.hostKey) } }

    func owners(waitingOn hostKey: String) -> Set<uid_t> {
        var owners = Set<uid_t>()
        for record in items.table.items.values where record.hostKey == hostKey { owners.insert(record.request.owner) }
        let dormant = items.table.dormant
        dormant.forEachWaiting { key, _, _ in
            if let sleeper = dormant.peek(key), items.table.hosts[sleeper.summary.hostID] == hostKey { owners.insert(sleeper.owner) }
            return true
        }
        return owners
    }

    func probeNow(_ hostKey: String) -> (outage: HostOutage, madeDue: Bool)? {
        let answer = hosts.scheduler.probeNow(hostKey, now: Date())
        if answer?.madeDue == true { logger.notice("probing an unreachable host now, as an operator asked", metadata: ["host": "\(hostKey)"]) }
        return answer
    }

    func heldHost(of record: ItemRecord) -> String? {
        guard case .unreachable? = hosts.hostWait(record.hostKey, now: Date()) else { return nil }
        return record.hostKey
    }
}
