import Foundation
import SpoolNetwork
import SpoolStore
import SpoolWatcher

/// This run of the daemon: whether it stops, what it has done (`RunSummary`, the exit code),
/// how a drain ends (`Drain`), and what the process holds while it runs — the watcher, the
/// network monitor, the worker's registration, the open-file budget, the heap policy.
final class RunState {
    var stopping = false
    var summary = RunSummary()
    let drain: Drain
    /// The watcher of `incoming/` and `control/`; nil once a drain has stopped it.
    var watcher: DirectoryWatcher?
    /// The last thing that went wrong with a watched folder, for status.
    var watcherTrouble: String?
    /// Reports network changes (rtnetlink); nil when it could not start.
    var networkMonitor: NetworkChangeMonitor?
    /// This worker's presence on the spool (see `WorkerRegistration`), held for the whole run.
    var registration: WorkerRegistration?
    /// How many items may hold a staging file open at once (see `DescriptorBudget`).
    let descriptors = DescriptorBudget.ofThisProcess()
    /// Gives the heap back once transfers stop (see `HeapPolicy`).
    var heap = HeapPolicy()
    /// What the last turn left for the sleep: the nearest deadline of any room (nil: none) and
    /// when the status report is due. A wake-up that brings nothing before that deadline skips
    /// the turn (see `Engine.run`). The first turn always runs.
    var nextDeadline: Date? = .distantPast
    var reportDue: Date?
    /// The nearest of the rooms' deadlines without the transfer session's rate gate (which moves
    /// with the bytes): what a wake-up that skips the turn sleeps towards, with the gate's.
    var roomsDeadline: Date?

    init(drain: Drain) { self.drain = drain }
}
