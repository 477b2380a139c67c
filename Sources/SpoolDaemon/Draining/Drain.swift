import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolWatcher

/// The draining room (`run --once`, `run --due`): when the drain lets its watcher go
/// (`DrainWatch`), what its last listings already took up, whether a due drain is done, and what
/// the drain last said it waits for. The loop asks it at the end of each turn
/// (`Engine+Draining.swift`) and carries out what it says: stop the watcher, start rescans,
/// take up what a last listing found, exit.
final class Drain {
    private let layout: SpoolLayout
    private let logger: Logger
    /// When the drain's inotify watcher stops (see `DrainWatch`).
    var watch: DrainWatch
    /// Names the drain's last listings found (`incoming/NAME`, `control/NAME`): each is taken up
    /// once, so a file that stays cannot keep the drain from ending.
    private var lastListingSeen: Set<String> = []
    /// Request files whose claim failed (they stay in `incoming/`): a last listing does not take
    /// them for new work. Kept only by a drain: a daemon that runs for months keeps no such set.
    private var unclaimable: Set<String> = []
    /// The deadline the drain last said it waits for.
    private var lastWait: Date?

    init(enabled: Bool, layout: SpoolLayout, logger: Logger) {
        watch = DrainWatch(enabled: enabled)
        self.layout = layout
        self.logger = logger
    }

    var enabled: Bool { watch.enabled }

    func claimFailed(_ name: String) {
        if enabled { unclaimable.insert(name) }
    }

    /// `run --due`: whether the drain is done (`DueDrainTally`, the core's rule, on every item
    /// held); if so, it says what is left and why, and counts those left for hosts or space.
    /// O(items), and only asked once all is quiet.
    func dueDrainIsDone(table: ItemTable, scheduler: Scheduler, now: Date, summary: inout RunSummary) -> Bool {
        let unreachable = Set(scheduler.hostOutages.map(\.hostKey))
        var tally = DueDrainTally(now: now, unreachable: unreachable,
                                  windowOpen: scheduler.configuration.window.map { $0.contains(now, in: .current) } ?? true)
        var anyDormantDue = false
        table.dormant.forEachWaiting { _, item, _ in
            anyDormantDue = tally.isDue(earliestStart: item.earliestStart, discretionary: item.discretionary,
                                        hostKey: { table.hosts[item.hostID] })
            return !anyDormantDue
        }
        if anyDormantDue { return false }
        tally.leaveDormant(table.dormant.count)
        for record in table.items.values {
            guard tally.count(record.phase, earliestStart: record.earliestStart, discretionary: record.discretionary,
                              hostKey: { record.hostKey }) else { return false }
        }
        let (left, forHosts, forSpace) = (tally.left, tally.forHosts, tally.forSpace)
        let metadata: Logger.Metadata = [
            "left": "\(left)", "unreachable-hosts": "\(unreachable.count)", "next-due": "\(scheduler.nextWakeup(now: now).map(RFC3339.format) ?? "-")"]
        summary.leftForHosts = forHosts
        summary.leftForSpace = forSpace
        if forHosts > 0 || forSpace > 0 {
            var m = metadata
            m["left-for-hosts"] = "\(forHosts)"
            m["left-for-space"] = "\(forSpace)"
            m["hosts"] = "\(unreachable.sorted().joined(separator: ","))"
            logger.warning("due drain done; items left for unreachable hosts or for space stay queued for the next run (exit 75)", metadata: m)
        } else {
            logger.notice("due drain done; items that are not due yet stay queued for a later run", metadata: metadata)
        }
        return true
    }

    /// The drain's last look at `incoming/` and `control/` once no inotify watcher runs: the
    /// request files and commands (for this process) that arrived since and were not taken up by
    /// an earlier look; request files that could not be claimed never count.
    func lastListing() -> (requests: [String], commands: [String]) {
        let requests = (DirectoryWatcher.candidates(in: layout.incoming.path) ?? [])
            .filter { !unclaimable.contains($0) && lastListingSeen.insert("incoming/" + $0).inserted }
        let commands = (DirectoryWatcher.candidates(in: layout.control.path) ?? [])
            .filter { ControlHandler.isCommandForThisProcess($0) && lastListingSeen.insert("control/" + $0).inserted }
        if !requests.isEmpty || !commands.isEmpty {
            logger.info("files arrived after the drain stopped watching; taking them up", metadata: [
                "requests": "\(requests.count)", "commands": "\(commands.count)"])
        }
        return (requests, commands)
    }

    /// The watcher that replaces the stopped inotify one when the drain goes on: rescans every
    /// `interval` seconds, with no listing at start (the last listing before exit covers what
    /// lands meanwhile); nil, logged, when it cannot start.
    func startRescans(interval: Double, post: @escaping @Sendable (WatcherEvent) -> Void) -> DirectoryWatcher? {
        let rescans = DirectoryWatcher(directory: layout.incoming.path, controlDirectory: layout.control.path,
                                       rescanInterval: interval, usesInotify: false, listsAtStart: false, deliver: post)
        do {
            try rescans.start()
            logger.debug("the drain stopped watching and goes on; incoming/ and control/ are rescanned until it ends",
                         metadata: ["seconds": "\(interval)"])
            return rescans
        } catch {
            logger.error("could not start rescans; a request file dropped now waits for the drain's last listing: \(error)")
            return nil
        }
    }

    /// `status/last-drain-HOST.json` (see `DrainRecord`): this host's, whoever wrote it.
    private var recordName: String { DrainRecord.fileName(host: ProcessInfo.processInfo.hostName.replacingOccurrences(of: "/", with: "_")) }

    /// Any run that starts supersedes the record the last drain on this host left: while it runs
    /// its live report speaks, and a drain leaves a new record when it exits.
    func supersedeRecord() { layout.status.remove(recordName) }

    /// At a drain's exit: what it leaves for `spoolfetch status` to show while no daemon runs —
    /// its exit status and why, the hosts it found down, and each item it left with its reason
    /// (from `report`, its last report). Written atomically and synced: a cron drain is often the
    /// last thing that runs before the machine sleeps or goes down.
    func leaveRecord(report: StatusReport, worker: String, mode: String, exitStatus: Int32, summary: RunSummary, now: Date) {
        let d = report.daemon
        let open = report.tasks.filter { $0.state != "done" && $0.state != "failed" }
        let left = (d.states ?? [:]).filter { $0.key != "done" && $0.key != "failed" }.values.reduce(0, +)
        var record = DrainRecord(
            worker: worker, host: d.host, pid: d.pid, version: d.version, mode: mode, startedAt: d.startedAt,
            endedAt: RFC3339.format(now), exitStatus: exitStatus, exitMeaning: Self.meaning(of: exitStatus),
            published: summary.published, failed: summary.failed, rejected: summary.rejected,
            left: max(left, open.count), leftForHosts: summary.leftForHosts, leftForSpace: summary.leftForSpace,
            unreachableHosts: d.unreachableHosts ?? [], itemsLeft: open, moreLeft: report.morePending)
        record.store = d.store
        do {
            try layout.status.writeAtomically(recordName, SpoolJSON.encode(record), sync: true)
            try layout.status.sync()
        } catch {
            logger.warning("could not leave the drain's record for spoolfetch status: \(error)")
        }
    }

    /// What a drain's exit status says, in the words of the README's "Exit status".
    static func meaning(of status: Int32) -> String {
        switch status {
        case Daemon.ExitStatus.success: return "every item it ended was published"
        case Daemon.ExitStatus.tryAgainLater: return "items left for unreachable hosts or space; the next run takes them"
        default: return "an item failed, a request was rejected or could not be claimed, or a group could not be ended"
        }
    }

    /// A drain with nothing running and nothing to publish waits only for items that are not due
    /// (earliest start, window, back-off): it says so once per new deadline `next`, so a drain
    /// that does not end says why.
    func waiting(until next: Date, items: Int) {
        guard next != lastWait else { return }
        lastWait = next
        logger.notice("drain is waiting for items that are not due yet", metadata: [
            "waiting": "\(items)", "next-due": "\(RFC3339.format(next))"])
    }
}
