import Foundation

/// When a drain (`run --once`, `run --due`) lets its inotify watcher go, and what it must do
/// before it exits without one. Pure: the engine feeds it and carries out its steps.
///
/// **Why.** Closing an inotify descriptor that still has watches waits for the kernel to retire
/// them (an SRCU grace period). At process exit that wait lies on the drain's critical path
/// (Benchmarks/RESULTS.md has its size). Once only
/// endings are left (publishes, group ends, hooks), nothing the watcher can bring changes an item
/// the drain holds but a `cancel` of a publish no batch has taken yet (`pause`, `resume` and
/// `retry` have nothing to act on), and such a command still arrives, by the rescans or the last
/// listing below, only later. So the watcher is stopped then, and its thread pays the wait while
/// the engine publishes.
///
/// **What is kept.** A request file or command that lands after the watch ended is found by a
/// last listing of `incoming/` and `control/` just before the drain would exit; if it brings
/// work, the drain goes on. A drain that does not exit as soon as the watcher has stopped (hooks
/// still run, a long publish, work that came back) is watched by rescans from then on, so a
/// command (`spoolfetch cancel`, which waits 10 s for its answer) is answered within the rescan
/// interval, not only at the end. Rescans, not a second inotify start: its descriptor could be
/// ≥ 1024, which libinotifytools' `select()` cannot take.
///
/// `turn` is called once per loop turn in which the drain does not exit.
///
/// | phase | input | condition | next phase | step |
/// |---|---|---|---|---|
/// | watching | turn | only endings left, not asked before | stopping | stopWatcher |
/// | stopping | stopNotDelivered | | watching (never asked again) | — |
/// | watching, stopping | watcherStopped | | stopped | — |
/// | stopped | turn | | rescanning | startRescans |
/// | any other | any | | unchanged | — |
///
/// A drain may exit in `watching` (the watcher never stopped: nothing changes from before), in
/// `stopped` or `rescanning` after a last listing that finds nothing new; never in `stopping`.
public struct DrainWatch: Sendable, Equatable {
    public enum Phase: Sendable, Equatable {
        case watching
        /// Asked to stop; its `stopped` has not come yet.
        case stopping
        /// No watcher: the drain looks at the folders itself before it exits.
        case stopped
        /// The drain went on after the stop: a rescan-only watcher runs.
        case rescanning
    }

    public enum Step: Sendable, Equatable {
        case none
        case stopWatcher
        case startRescans
    }

    public private(set) var phase: Phase = .watching
    /// Whether the watcher was asked once; a stop that could not be delivered is not asked again.
    private var asked = false
    /// false: not a drain, or no inotify (nothing to tear down): always `watching`.
    public let enabled: Bool

    public init(enabled: Bool) { self.enabled = enabled }

    /// Once per loop turn. `onlyEndingsLeft`: the intake is done and every item held is
    /// publishing or ended (nothing queued, running, retrying, waiting for space, paused or dormant).
    public mutating func turn(onlyEndingsLeft: Bool) -> Step {
        guard enabled else { return .none }
        switch phase {
        case .watching where onlyEndingsLeft && !asked:
            asked = true
            phase = .stopping
            return .stopWatcher
        case .stopped:
            phase = .rescanning
            return .startRescans
        default:
            return .none
        }
    }

    /// The wake-up could not be delivered: the watcher goes on until an event of its own wakes
    /// it, and then stops (`watcherStopped` in `watching`).
    public mutating func stopNotDelivered() {
        if phase == .stopping { phase = .watching }
    }

    /// The inotify watcher reported `stopped` (the rescan-only one is never stopped).
    public mutating func watcherStopped() {
        if phase == .stopping || phase == .watching { phase = .stopped }
    }

    /// The drain may not exit while the watcher's stop is under way: a file that lands in that
    /// moment would be seen neither by the watcher nor by the last listing.
    public var blocksExit: Bool { phase == .stopping }

    /// No inotify watcher runs: before it exits, the drain lists `incoming/` and `control/`.
    public var needsLastListing: Bool { phase == .stopped || phase == .rescanning }
}

/// Whether a due drain (`run --due`) is done: nothing runs, retries, waits for space or is being
/// published, and every queued item is not due yet (a future earliest start, or discretionary
/// outside the window). Those stay claimed for the next run; items of a host that cannot be
/// reached, or waiting for space, are counted apart: the run exits 75 (`EX_TEMPFAIL`) for them.
/// Pure: the shell hands it each item's facts until it answers "not done".
public struct DueDrainTally: Sendable, Equatable {
    public let now: Date
    /// Hosts held unreachable: their items are not fetchable now either, and wait for a later
    /// run rather than keep a nightly drain going for as long as the outage lasts.
    public let unreachable: Set<String>
    /// Whether the discretionary window is open (or there is none).
    public let windowOpen: Bool
    /// Items left for the next run; of them, for an unreachable host and for space.
    public private(set) var left = 0
    public private(set) var forHosts = 0
    public private(set) var forSpace = 0

    public init(now: Date, unreachable: Set<String>, windowOpen: Bool) {
        self.now = now; self.unreachable = unreachable; self.windowOpen = windowOpen
    }

    /// Whether a queued item with these facts may start now (counting it if only its host
    /// keeps it back).
    public mutating func isDue(earliestStart: Date?, discretionary: Bool, hostKey: () -> String) -> Bool {
        let started = earliestStart.map { $0 <= now } ?? true
        guard started && (!discretionary || windowOpen) else { return false }
        if unreachable.contains(hostKey()) { forHosts += 1; return false }
        return true
    }

    /// Counts one item; false when it keeps the drain going (under way, or due).
    public mutating func count(_ phase: ItemPhase, earliestStart: Date?, discretionary: Bool,
                               hostKey: () -> String) -> Bool {
        switch phase {
        case .running, .retrying, .publishing:
            return false
        case .waitingForSpace, .waitingToPublish:
            // Space is not there now: the next run tries again, as cron's next night would.
            forSpace += 1
            left += 1
            return true
        case .queued:
            if isDue(earliestStart: earliestStart, discretionary: discretionary, hostKey: hostKey) { return false }
            left += 1
            return true
        case .paused, .published, .failed:
            return true
        }
    }

    /// Items left without a record of their own (dormant one-item requests, none of them due).
    public mutating func leaveDormant(_ count: Int) { left += count }
}
