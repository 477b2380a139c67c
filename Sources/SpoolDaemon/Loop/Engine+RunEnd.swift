import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolWatcher

/// When a run ends, asked at the end of each turn: a stop ends once the I/O queue, the publisher
/// and the hooks are quiet; a drain (`run --once`) when nothing is left; a due drain
/// (`run --due`) when nothing left is due (`Drain`, the draining room, decides what is its own).
extension Engine {
    func shouldExit() -> Bool {
        // Hooks count: a drain that has ended its items waits for them, and shows them in status.
        let quiet = io.outstanding == 0 && !publishing.inFlight && hooks.groupHooksOutstanding == 0
            && hooks.running == 0 && hooks.waiting == 0
        if runState.stopping { return quiet }
        guard configuration.once || configuration.due, intake.initialScanDone, intake.backlogIsEmpty,
              quiet, publishing.isIdle else { return false }
        guard items.table.isEmpty || (configuration.due && !configuration.once
                                && runState.drain.dueDrainIsDone(table: items.table, scheduler: hosts.scheduler, now: Date(), summary: &runState.summary)) else { return false }
        if runState.drain.watch.blocksExit { return false }
        return !(runState.drain.watch.needsLastListing && lastListingFoundWork())
    }

    /// Stops a drain's inotify watcher once only endings are left, and starts rescans if the
    /// drain goes on after that (see `DrainWatch`). O(1) a turn; called when the drain does not exit.
    func tendWatcher() {
        guard runState.drain.enabled else { return }
        let onlyEndingsLeft = intake.initialScanDone && intake.backlogIsEmpty && !runState.stopping && hosts.scheduler.isIdle
            && items.table.busy.isEmpty && items.table.dormant.count == 0 && space.waitingCount == 0
        switch runState.drain.watch.turn(onlyEndingsLeft: onlyEndingsLeft) {
        case .none:
            break
        case .stopWatcher:
            if runState.watcher?.stop() != true { runState.drain.watch.stopNotDelivered() }
        case .startRescans:
            let inbox = self.inbox
            let interval = configuration.rescanInterval > 0 ? configuration.rescanInterval : 1
            if let rescans = runState.drain.startRescans(interval: interval, post: { inbox.post(.watcher($0)) }) { runState.watcher = rescans }
        }
    }

    /// What a drain's last listing found is taken up — a command at once, a request through the
    /// backlog — and the drain goes on.
    func lastListingFoundWork() -> Bool {
        let (requests, commands) = runState.drain.lastListing()
        guard !requests.isEmpty || !commands.isEmpty else { return false }
        for name in commands { route(.watcher(.control(name))) }
        intake.listed(requests)
        operators.status.dirty = true
        return true
    }

    /// A drain with nothing running and nothing to publish says what it waits for.
    func reportDrainWait() {
        guard driver.running.isEmpty, publishing.isIdle, io.outstanding == 0, !items.table.isEmpty,
              let next = hosts.scheduler.nextWakeup(now: Date()) else { return }
        runState.drain.waiting(until: next, items: hosts.scheduler.queuedCount)
    }

    /// At a drain's exit, before its live report goes: a last report (each item's reason, the
    /// hosts down), left behind as the drain's record for `status` (see `Drain.leaveRecord`).
    func leaveDrainRecord() {
        let now = Date()
        writeStatus(now: now)
        guard let report = operators.status.lastReport else { return }
        runState.drain.leaveRecord(report: report, worker: operators.status.workerName, mode: configuration.due && !configuration.once ? "due" : "once",
                                   exitStatus: runState.summary.exitCode, summary: runState.summary, now: now)
    }
}
