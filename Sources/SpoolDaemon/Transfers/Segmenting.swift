import Foundation
import SpoolCore
import Logging
import SpoolScheduler
import SpoolStore

/// Segmented transfers, the engine's side: a large body whose server answers ranges gets the
/// host's spare connections (`Scheduler.spareConnections`) as segments, and gives them back as
/// they finish; while other items of the host wait, a finished range takes no new one, and the
/// connections those items lack are given back at once (`Scheduler.segmentConnectionsAllowed`).
extension Engine {
    func growSegments() {
        for candidate in driver.session.splitCandidates() {
            guard let record = driver.running[candidate.key] else { continue }
            let limit = min(candidate.maxSegments, configuration.perHost) - 1
            let spare = scheduler.spareConnections(forHost: record.hostKey, upTo: limit)
            guard spare > 0, driver.markSegmented(record, ranges: spare + 1) else { continue }
            let started = driver.session.split(candidate.key, connections: spare)
            guard started > 0 else { continue }
            logger.info("large body fetched in segments", metadata: [
                "item": "\(record.id)", "connections": "\(started + 1)"])
        }
        // The scheduler counts the segments as they are before it says what each may keep.
        for (key, segments) in driver.session.takeSegmentConnectionChanges() {
            scheduler.setSegmentConnections(key, segments)
        }
        let now = Date()
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
            driver.saveSegmentState(record, now: now)
        }
        status.busyHosts = scheduler.busyHosts.map {
            BusyHost(host: $0.host, connections: $0.connections, limit: $0.limit, why: $0.why, pacedRate: $0.pacedRate)
        }
        // An HTTP/1.1 host's connections grew or shrank (`HostConnectionLimit`): said once per change.
        for change in scheduler.takeHostLimitChanges() {
            logger.info("host connections", metadata: ["host": "\(change.host)", "connections": "\(change.limit)",
                                                       "why": "\(change.reason)"])
            status.markDirty()
        }
    }
}
