import Foundation
import SpoolRequest
import SpoolStore

/// Cron mode: with no daemon on the spool, what the last drains left (`DrainRecord`,
/// `status/last-drain-HOST.json`) stands in for a live report — when each ended and with which
/// exit status, the hosts it found down and when it would have probed them, and why each item it
/// left is still pending. Always labelled as a past drain's, never passed off as live.
extension SpoolOverview {
    /// The drain records in `status/`, oldest first. Only asked when no daemon runs.
    static func drainRecords(statusFolder: String) -> [DrainRecord] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: statusFolder)) ?? []).filter(DrainRecord.isRecord)
        return names.compactMap { name -> DrainRecord? in
            guard let data = FileManager.default.contents(atPath: statusFolder + "/" + name) else { return nil }
            return try? JSONDecoder().decode(DrainRecord.self, from: data)
        }.sorted { $0.endedAt < $1.endedAt }
    }

    /// Adds the records' items that are still claimed (a `cancel` without a daemon may have
    /// ended a request since) to the overview, each with the reason its drain gave.
    mutating func addDrainRecords(_ records: [DrainRecord], spool: String) {
        guard !records.isEmpty else { return }
        lastDrains = records
        let claimed = Set(QueueListing.claimedRequests(active: spool + "/active").map(\.1))
        for record in records {
            tasks += record.itemsLeft.filter { claimed.contains($0.request) }
            morePending += record.moreLeft
        }
    }

    /// The hosts the last drains found down, `host:port` → what an item of theirs waits for
    /// (for `status --all`, whose items read from the spool carry no reason of their own).
    public var heldHostsFromDrains: [String: String] {
        var held: [String: String] = [:]
        for record in lastDrains ?? [] {
            for h in record.unreachableHosts {
                held[h.host] = Self.hostWaitLine(h, record: record)
            }
        }
        return held
    }

    static func hostWaitLine(_ h: UnreachableHost, record: DrainRecord) -> String {
        "host \(h.host) unreachable since \(h.since); next probe \(h.nextProbe) (or the next run's start)"
    }

    /// `last drain at T (2m05s ago), exit 75: items left …` — the line `status` prints, on
    /// stderr beside "no daemon is running" when its output is for a script.
    public static func drainHeadline(_ r: DrainRecord, now: Date = Date()) -> String {
        let age = RFC3339.parse(r.endedAt).map { " (\(duration(max(0, now.timeIntervalSince($0)))) ago)" } ?? ""
        return "last drain at \(r.endedAt)\(age), exit \(r.exitStatus): \(r.exitMeaning)"
    }

    /// The lines a table shows for the last drains, in place of a live daemon's.
    func drainLines(now: Date = Date()) -> [String] {
        var out: [String] = []
        for r in lastDrains ?? [] {
            out.append(Self.drainHeadline(r, now: now))
            out.append("  run --\(r.mode) on \(r.host) pid \(r.pid), started \(r.startedAt)")
            var left = "  \(r.published) published, \(r.failed) failed, \(r.rejected) rejected; \(r.left) left"
            if r.leftForHosts > 0 || r.leftForSpace > 0 {
                left += " (\(r.leftForHosts) for unreachable hosts, \(r.leftForSpace) for space)"
            }
            out.append(left)
            for h in r.unreachableHosts {
                out.append("  host \(h.host) unreachable since \(h.since), next probe \(h.nextProbe) (or the next run's start)")
                out.append("    last error: \(h.lastError)")
            }
        }
        return out
    }
}
