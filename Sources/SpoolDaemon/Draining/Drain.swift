import Foundation

/// The draining room's state (`run --once`, `run --due`): when the drain lets its watcher go
/// (`DrainWatch`), what its last listings already took up, and what it last said it waits for.
/// The decisions that read the rest of the engine (may the run exit? is only ending left?) are
/// in `Engine+Draining.swift`.
struct Drain {
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

    init(enabled: Bool) {
        watch = DrainWatch(enabled: enabled)
    }

    var enabled: Bool { watch.enabled }

    mutating func claimFailed(_ name: String) {
        if enabled { unclaimable.insert(name) }
    }

    /// Of the names a last listing found, those not taken up before (and, for requests, not
    /// known to be unclaimable).
    mutating func newNames(requests: [String], commands: [String]) -> (requests: [String], commands: [String]) {
        (requests.filter { !unclaimable.contains($0) && lastListingSeen.insert("incoming/" + $0).inserted },
         commands.filter { lastListingSeen.insert("control/" + $0).inserted })
    }

    /// Whether `next` is a deadline the drain has not announced yet (and now has).
    mutating func announceWait(until next: Date) -> Bool {
        guard next != lastWait else { return false }
        lastWait = next
        return true
    }
}
