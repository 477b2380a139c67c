import Foundation
import SpoolCore
import SpoolRequest
import SpoolScheduler
import SpoolTransfer

/// A host that cannot be reached, and one that answers again: the engine's side of the
/// scheduler's host outages (one probe at a time, its own back-off, no attempts used).
extension Engine {
    /// The item's transfer did not reach its host: the scheduler holds the host (one probe at a
    /// time, its own back-off) and puts the item back in its queue. One log line per outage.
    func hostUnreachable(_ record: ItemRecord, error: String) {
        let host = record.hostKey
        let now = Date()
        let wasHeld = scheduler.hostOutages.contains { $0.hostKey == host }
        let wasProbe = scheduler.isProbe(record.key)
        record.outageBegan(at: now)
        scheduler.hostUnreachable(host, failedItem: record.key, now: now, error: error)
        let outage = scheduler.hostOutages.first { $0.hostKey == host }
        if !wasHeld {
            let nextProbe = "\(outage.map { RFC3339.format($0.nextProbe) } ?? "-")"
            if let proxy = TransferFailure.unreachableProxy(in: error) {
                // The host was never tried: the operator's fault to look for is the proxy.
                logger.warning("proxy unreachable; the items of the host it serves wait and use up no attempts", metadata: [
                    "proxy": "\(proxy)", "host": "\(host)", "error": "\(error)", "next-probe": "\(nextProbe)"])
            } else {
                logger.warning("host unreachable; its items wait and use up no attempts", metadata: [
                    "host": "\(host)", "error": "\(error)", "next-probe": "\(nextProbe)"])
            }
        } else if wasProbe {
            logger.info("probe failed; host still unreachable", metadata: [
                "host": "\(host)", "error": "\(error)",
                "next-probe": "\(outage.map { RFC3339.format($0.nextProbe) } ?? "-")"])
        }
        // Items waiting behind the host never start, so none would notice its resource timeout:
        // look at them whenever the outage is (re)confirmed — at most once per probe.
        if !wasHeld || wasProbe {
            let hostID = record.summary.hostID
            for other in Array(table.items.values) where other.summary.hostID == hostID && other !== record {
                send(.deadlineCheck, to: other)
            }
            // A dormant item is woken only if the check will end it.
            let timedOut = now.addingTimeInterval(-policy.resourceTimeout).timeIntervalSinceReferenceDate
            var expired: [Int] = []
            table.dormant.forEachWaiting { key, summary, firstQueued in
                if summary.hostID == hostID, firstQueued <= timedOut { expired.append(key) }
                return true
            }
            for key in expired { if let other = table.wake(key) { send(.deadlineCheck, to: other) } }
            send(.deadlineCheck, to: record)
            if let outage {
                moveHeldItemsToMirrors(host: host, hostID: record.request.hosts.id(of: host), since: outage.since, now: now)
            }
        }
    }

    /// Something of the item's host answered: if the host was held, its items may start now.
    func hostAnswered(_ record: ItemRecord, _ facts: ResponseFacts) {
        // What the host speaks sets its budget: streams of one connection, or a connection each.
        if facts.httpStatus != 0 { scheduler.hostSpoke(record.hostKey, multiplexes: facts.multiplexed) }
        let now = Date()
        record.outageEnded(at: now)
        guard let outage = scheduler.hostReachable(record.hostKey) else { return }
        logger.notice("host reachable again", metadata: [
            "host": "\(outage.hostKey)", "unreachable-since": "\(RFC3339.format(outage.since))",
            "seconds": "\(Int(now.timeIntervalSince(outage.since)))", "probes": "\(outage.failures)"])
        status.markDirty()
    }
}
