import Foundation
import Logging
import SpoolRequest
import SpoolWatcher

/// The draining room, the engine's side: when a run ends. A stop ends once the I/O queue, the
/// publisher and the hooks are quiet; a drain (`run --once`) when nothing is left; a due drain
/// (`run --due`) when nothing left is due. Its own state is `Drain`.
extension Engine {
    func shouldExit() -> Bool {
        // Hooks count: a drain that has ended its items waits for them, and shows them in status.
        let quiet = io.outstanding == 0 && !publishing.inFlight && hooks.groupHooksOutstanding == 0
            && hooks.running == 0 && hooks.waiting == 0
        if stopping { return quiet }
        guard configuration.once || configuration.due, intake.initialScanDone, intake.backlogIsEmpty,
              quiet, publishing.isIdle else { return false }
        guard table.isEmpty || (configuration.due && !configuration.once && dueDrainIsDone(now: Date())) else { return false }
        if drain.watch.blocksExit { return false }
        return !(drain.watch.needsLastListing && lastListingFoundWork())
    }

    /// `run --due`: nothing runs, retries, waits for space or is being published, and every queued
    /// item is not due yet (a future earliest start, or discretionary outside the window). Those
    /// stay claimed and are picked up by the next run. O(items), and only asked once all is quiet.
    private func dueDrainIsDone(now: Date) -> Bool {
        var left = 0
        // Items of a host that cannot be reached are not fetchable now either: they wait for a
        // later run rather than keep a nightly drain going for as long as the outage lasts.
        let unreachable = Set(scheduler.hostOutages.map(\.hostKey))
        let windowOpen = scheduler.configuration.window.map { $0.contains(now, in: .current) } ?? true
        func isDue(_ earliestStart: Date?, discretionary: Bool, hostKey: @autoclosure () -> String) -> Bool {
            let started = earliestStart.map { $0 <= now } ?? true
            return started && (!discretionary || windowOpen) && !unreachable.contains(hostKey())
        }
        var anyDormantDue = false
        table.dormant.forEachWaiting { _, summary, _ in
            anyDormantDue = isDue(summary.earliestStart, discretionary: summary.discretionary, hostKey: table.hosts[summary.hostID])
            return !anyDormantDue
        }
        if anyDormantDue { return false }
        left += table.dormant.count
        for record in table.items.values {
            switch record.phase {
            case .running, .retrying, .waitingForSpace, .publishing:
                return false
            case .queued:
                if isDue(record.earliestStart, discretionary: record.discretionary, hostKey: record.hostKey) { return false }
                left += 1
            case .paused, .published, .failed:
                continue
            }
        }
        logger.notice("due drain done; items that are not due yet stay queued for a later run", metadata: [
            "left": "\(left)", "unreachable-hosts": "\(unreachable.count)", "next-due": "\(scheduler.nextWakeup(now: now).map(RFC3339.format) ?? "-")"])
        return true
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
            // No listing at start: the last listing before exit covers what lands meanwhile.
            let rescans = DirectoryWatcher(directory: layout.incoming.path, controlDirectory: layout.control.path,
                                           rescanInterval: interval, usesInotify: false, listsAtStart: false) {
                inbox.post(.watcher($0))
            }
            do {
                try rescans.start()
                watcher = rescans
                logger.debug("the drain stopped watching and goes on; incoming/ and control/ are rescanned until it ends",
                             metadata: ["seconds": "\(interval)"])
            } catch {
                logger.error("could not start rescans; a request file dropped now waits for the drain's last listing: \(error)")
            }
        }
    }

    /// A drain's last look at `incoming/` and `control/` once no inotify watcher runs: a file
    /// that arrived since is taken up (a command at once, a request through the backlog), and
    /// the drain goes on. Each name counts once, and request files that could not be claimed
    /// not at all, so a file that stays there cannot keep the drain from ending.
    func lastListingFoundWork() -> Bool {
        let (requests, commands) = drain.newNames(
            requests: DirectoryWatcher.candidates(in: layout.incoming.path) ?? [],
            commands: (DirectoryWatcher.candidates(in: layout.control.path) ?? []).filter(ControlHandler.isCommandForThisProcess))
        guard !requests.isEmpty || !commands.isEmpty else { return false }
        logger.info("files arrived after the drain stopped watching; taking them up", metadata: [
            "requests": "\(requests.count)", "commands": "\(commands.count)"])
        for name in commands { route(.watcher(.control(name))) }
        intake.listed(requests)
        status.markDirty()
        return true
    }

    /// A drain with nothing running and nothing to publish waits only for items that are not due
    /// (earliest start, window, back-off): say so once per new deadline, so a drain that does not
    /// end says why.
    func reportDrainWait() {
        guard driver.running.isEmpty, publishing.isIdle, io.outstanding == 0, !table.isEmpty,
              let next = scheduler.nextWakeup(now: Date()), drain.announceWait(until: next) else { return }
        logger.notice("drain is waiting for items that are not due yet", metadata: [
            "waiting": "\(scheduler.queuedCount)", "next-due": "\(RFC3339.format(next))"])
    }
}
