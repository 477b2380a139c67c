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
        if stopping { return quiet }
        guard configuration.once || configuration.due, intake.initialScanDone, intake.backlogIsEmpty,
              quiet, publishing.isIdle else { return false }
        guard table.isEmpty || (configuration.due && !configuration.once
                                && drain.dueDrainIsDone(table: table, scheduler: scheduler, now: Date(), summary: &summary)) else { return false }
        if drain.watch.blocksExit { return false }
        return !(drain.watch.needsLastListing && lastListingFoundWork())
    }

    /// Stops a drain's inotify watcher once only endings are left, and starts rescans if the
    /// drain goes on after that (see `DrainWatch`). O(1) a turn; called when the drain does not exit.
    func tendWatcher() {
        guard drain.enabled else { return }
        let onlyEndingsLeft = intake.initialScanDone && intake.backlogIsEmpty && !stopping && scheduler.isIdle
            && table.busy.isEmpty && table.dormant.count == 0 && space.waitingCount == 0
        switch drain.watch.turn(onlyEndingsLeft: onlyEndingsLeft) {
        case .none:
            break
        case .stopWatcher:
            if watcher?.stop() != true { drain.watch.stopNotDelivered() }
        case .startRescans:
            let inbox = self.inbox
            let interval = configuration.rescanInterval > 0 ? configuration.rescanInterval : 1
            if let rescans = drain.startRescans(interval: interval, post: { inbox.post(.watcher($0)) }) { watcher = rescans }
        }
    }

    /// What a drain's last listing found is taken up — a command at once, a request through the
    /// backlog — and the drain goes on.
    func lastListingFoundWork() -> Bool {
        let (requests, commands) = drain.lastListing()
        guard !requests.isEmpty || !commands.isEmpty else { return false }
        for name in commands { route(.watcher(.control(name))) }
        intake.listed(requests)
        status.markDirty()
        return true
    }

    /// A drain with nothing running and nothing to publish says what it waits for.
    func reportDrainWait() {
        guard driver.running.isEmpty, publishing.isIdle, io.outstanding == 0, !table.isEmpty,
              let next = scheduler.nextWakeup(now: Date()) else { return }
        drain.waiting(until: next, items: scheduler.queuedCount)
    }
}
