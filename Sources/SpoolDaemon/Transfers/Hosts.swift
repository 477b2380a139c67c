import Foundation
import SpoolCore
import Logging
import SpoolConfiguration
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// The scheduler and what the engine learns of hosts: a host that cannot be reached (one probe at
/// a time, its own back-off, no attempts used), one that answers again, one that refuses past its
/// rate (`HostPace`), the connections a large body may take as segments, and when items held
/// behind a host move on to their mirrors. It decides which items must hear of it; the engine's
/// loop hands them their events.
final class Hosts {
    var scheduler: Scheduler
    private let logger: Logger
    /// `--mirror-after`: how long a host is down before items with mirrors move on.
    private var mirrorAfter: TimeInterval
    /// `--per-host`: the most segments one body takes.
    private var perHost: Int

    init(configuration: DaemonConfiguration, logger: Logger) {
        scheduler = Scheduler(configuration: SchedulerConfiguration(configuration))
        mirrorAfter = configuration.mirrorAfter
        perHost = configuration.perHost
        self.logger = logger
    }

    /// Whether `key` was started as its host's probe; see `hostWait`.
    func isProbe(_ key: ItemKey) -> Bool { Self.isProbe(key, in: &scheduler) }

    /// What holds `host` back at `now`, for status. Asked in place (`inout`): a call through the
    /// stored property copied the whole scheduler first (some twenty collections, a retain and a
    /// release each), at every start and for every item of every status report.
    func hostWait(_ host: String, now: Date) -> HostWait? { Self.hostWait(host, now: now, in: &scheduler) }

    /// The discretionary window, read in place as `hostWait` is (an item's cause asks at each
    /// deadline or cancel ending, which a large request's cancel makes by the thousand).
    var window: DailyWindow? { Self.window(in: &scheduler) }

    private static func window(in scheduler: inout Scheduler) -> DailyWindow? { scheduler.configuration.window }

    private static func isProbe(_ key: ItemKey, in scheduler: inout Scheduler) -> Bool { scheduler.isProbe(key) }

    private static func hostWait(_ host: String, now: Date, in scheduler: inout Scheduler) -> HostWait? {
        scheduler.hostWait(host, now: now)
    }

    /// A reload: what starts from now on follows the new limits.
    func reconfigure(_ configuration: DaemonConfiguration) {
        scheduler.reconfigure(SchedulerConfiguration(configuration))
        mirrorAfter = configuration.mirrorAfter
        perHost = configuration.perHost
    }

    // MARK: Outages

    /// The item's transfer did not reach its host: the scheduler holds the host and puts the item
    /// back in its queue. One log line per outage. Returns the items whose resource timeout must be
    /// looked at now — items waiting behind the host never start, so none would notice it — once
    /// per outage and per failed probe (nil otherwise), the item itself last.
    func unreachable(_ record: ItemRecord, error: String, table: ItemTable, resourceTimeout: TimeInterval,
                     now: Date) -> [ItemRecord]? {
        let host = record.hostKey
        let wasHeld = scheduler.hostOutages.contains { $0.hostKey == host }
        let wasProbe = scheduler.isProbe(record.key)
        record.outageBegan(at: now)
        scheduler.hostUnreachable(host, failedItem: record.key, now: now, error: error)
        let nextProbe = scheduler.hostOutages.first { $0.hostKey == host }.map { RFC3339.format($0.nextProbe) } ?? "-"
        if !wasHeld {
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
                "host": "\(host)", "error": "\(error)", "next-probe": "\(nextProbe)"])
        }
        guard !wasHeld || wasProbe else { return nil }
        let hostID = record.summary.hostID
        var checks = table.items.values.filter { $0.summary.hostID == hostID && $0 !== record }
        // A dormant item is woken only if the check will end it.
        let timedOut = now.addingTimeInterval(-resourceTimeout).timeIntervalSinceReferenceDate
        var expired: [Int] = []
        table.dormant.forEachWaiting { key, summary, firstQueued in
            if summary.hostID == hostID, firstQueued <= timedOut { expired.append(key) }
            return true
        }
        checks += expired.compactMap { table.wake($0) }
        checks.append(record)
        return checks
    }

    /// An outage of the item's host was confirmed again: the items held behind it that have
    /// mirrors, once it has lasted longer than `--mirror-after` (dormant ones woken), to move on.
    func itemsMovingToMirrors(from record: ItemRecord, table: ItemTable, now: Date) -> [ItemRecord] {
        let host = record.hostKey
        guard let outage = scheduler.hostOutages.first(where: { $0.hostKey == host }),
              now.timeIntervalSince(outage.since) >= mirrorAfter else { return [] }
        let hostID = record.request.hosts.id(of: host)
        var dormant: [Int] = []
        table.dormant.forEachWaiting { key, summary, _ in
            if summary.hasMirrors && summary.hostID == hostID { dormant.append(key) }
            return true
        }
        for key in dormant { _ = table.wake(key) }
        return table.items.values.filter { $0.summary.hasMirrors && $0.hostKey == host }
    }

    /// Whether the item's host has been unreachable for longer than `--mirror-after`.
    func downLong(_ record: ItemRecord, now: Date) -> Bool {
        let host = record.hostKey
        guard let outage = scheduler.hostOutages.first(where: { $0.hostKey == host }) else { return false }
        return now.timeIntervalSince(outage.since) >= mirrorAfter
    }

    /// Something of the item's host answered. `ended`: at the transfer's end (else its body
    /// began). Returns whether the answer was a refusal of a paced host that costs the item no
    /// attempt (`HostPace`), and whether a held host is reachable again.
    func answered(_ record: ItemRecord, _ facts: ResponseFacts, ended: Bool, now: Date) -> (free: Bool, reachableAgain: Bool) {
        // What the host speaks sets its budget: streams of one connection, or a connection each.
        if facts.httpStatus != 0 { scheduler.hostSpoke(record.hostKey, multiplexes: facts.multiplexed) }
        let free = pace(record, facts, ended: ended, now: now)
        record.outageEnded(at: now)
        guard let outage = scheduler.hostReachable(record.hostKey) else { return (free, false) }
        logger.notice("host reachable again", metadata: [
            "host": "\(outage.hostKey)", "unreachable-since": "\(RFC3339.format(outage.since))",
            "seconds": "\(Int(now.timeIntervalSince(outage.since)))", "probes": "\(outage.failures)"])
        return (free, true)
    }

    /// The host's rate limits: a 429 or 503 at a transfer's end slows its requests down, any
    /// other answer speeds them up again, and `RateLimit` headers hold or cap them. Returns
    /// whether the refusal costs no attempt.
    private func pace(_ record: ItemRecord, _ facts: ResponseFacts, ended: Bool, now: Date) -> Bool {
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

    // MARK: Segments

    /// Segmented transfers: a large body whose server answers ranges gets the host's spare
    /// connections (`Scheduler.spareConnections`) as segments, and gives them back as they
    /// finish; while other items of the host wait, a finished range takes no new one, and the
    /// connections those items lack are given back at once (`Scheduler.segmentConnectionsAllowed`,
    /// fair shares). Returns whether a host's connection limit changed.
    func tendSegments(_ driver: TransferDriver, now: Date) -> Bool {
        for candidate in driver.session.splitCandidates() {
            guard let record = driver.running[candidate.key] else { continue }
            let limit = min(candidate.maxSegments, perHost) - 1
            let spare = scheduler.spareConnections(forHost: record.hostKey, upTo: limit)
            guard spare > 0, driver.states.markSegmented(record, ranges: spare + 1) else { continue }
            let started = driver.session.split(candidate.key, connections: spare)
            guard started > 0 else { continue }
            logger.info("large body fetched in segments", metadata: [
                "item": "\(record.id)", "connections": "\(started + 1)"])
        }
        // The scheduler counts the segments as they are before it says what each may keep.
        for (key, segments) in driver.session.takeSegmentConnectionChanges() {
            scheduler.setSegmentConnections(key, segments)
        }
        for key in driver.session.segmentedKeys {
            guard let record = driver.running[key] else { continue }
            driver.session.setStealing(key, !scheduler.hostHasWaiting(record.hostKey))
            // Fair shares: connections its host's waiting items lack are given back now.
            let yielded = driver.session.yieldSegments(key, keep: scheduler.segmentConnectionsAllowed(key))
            if yielded > 0 {
                for (key, segments) in driver.session.takeSegmentConnectionChanges() { scheduler.setSegmentConnections(key, segments) }
                logger.info("segments yielded to waiting items of the host", metadata: [
                    "item": "\(record.id)", "host": "\(record.hostKey)", "connections": "\(yielded)"])
            }
            driver.states.saveSegmentState(record, now: now)
        }
        // An HTTP/1.1 host's connections grew or shrank (`HostConnectionLimit`): said once per change.
        let changes = scheduler.takeHostLimitChanges()
        for change in changes {
            logger.info("host connections", metadata: ["host": "\(change.host)", "connections": "\(change.limit)",
                                                       "why": "\(change.reason)"])
        }
        return !changes.isEmpty
    }

    /// Hosts with transfers running, for a status report: connections held, the most allowed
    /// now and why, the paced rate. Made when a report is written, not at every turn.
    var busyHosts: [BusyHost] {
        scheduler.busyHosts.map {
            BusyHost(host: $0.host, connections: $0.connections, limit: $0.limit, why: $0.why, pacedRate: $0.pacedRate)
        }
    }
}
