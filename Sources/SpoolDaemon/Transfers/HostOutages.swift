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
    /// `ended`: the transfer's end (else its body began). Returns whether the answer was a
    /// refusal of a paced host that costs the item no attempt (`HostPace`).
    @discardableResult
    func hostAnswered(_ record: ItemRecord, _ facts: ResponseFacts, ended: Bool = false) -> Bool {
        // What the host speaks sets its budget: streams of one connection, or a connection each.
        if facts.httpStatus != 0 { scheduler.hostSpoke(record.hostKey, multiplexes: facts.multiplexed) }
        let now = Date()
        record.outageEnded(at: now)
        let free = paceHost(record, facts, ended: ended, now: now)
        guard let outage = scheduler.hostReachable(record.hostKey) else { return free }
        logger.notice("host reachable again", metadata: [
            "host": "\(outage.hostKey)", "unreachable-since": "\(RFC3339.format(outage.since))",
            "seconds": "\(Int(now.timeIntervalSince(outage.since)))", "probes": "\(outage.failures)"])
        status.markDirty()
        return free
    }

    /// The host's rate limits (see `HostPace`): a 429 or 503 at a transfer's end slows its
    /// requests down, any other answer speeds them up again, and `RateLimit` headers hold or cap
    /// them. Returns whether the refusal costs no attempt.
    private func paceHost(_ record: ItemRecord, _ facts: ResponseFacts, ended: Bool, now: Date) -> Bool {
        if !facts.rateLimitHeaders.isEmpty {
            var limits = RateLimitFacts()
            for (name, value) in facts.rateLimitHeaders { _ = limits.read(name: name, value: value) }
            if !limits.isEmpty { scheduler.hostRateLimit(record.hostKey, limits, now: now) }
        }
        if ended, facts.httpStatus == 429 || facts.httpStatus == 503 {
            let wasPaced = scheduler.hostPaces[record.hostKey] != nil
            let free = scheduler.hostRefused(record.hostKey, now: now, retryAfter: facts.retryAfter)
            if !wasPaced, let pace = scheduler.hostPaces[record.hostKey] {
                logger.notice("host refuses requests past its rate; pacing them", metadata: [
                    "host": "\(record.hostKey)", "status": "\(facts.httpStatus)",
                    "requests-per-second": "\(String(format: "%.1f", pace.rate))"])
            }
            logger.debug("host refused a request; paced", metadata: [
                "host": "\(record.hostKey)", "status": "\(facts.httpStatus)", "free": "\(free)",
                "requests-per-second": "\(String(format: "%.1f", scheduler.hostPaces[record.hostKey]?.rate ?? 0))"])
            return free
        }
        // Counted at the end: a small body begins and ends within one turn, unseen in between.
        if ended, facts.httpStatus >= 200, facts.httpStatus < 400 { scheduler.hostAnsweredRequest(record.hostKey, now: now) }
        return false
    }
}
