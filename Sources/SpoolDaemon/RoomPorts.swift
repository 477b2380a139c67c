import Foundation
import SpoolStore

/// What the rooms (`Intake`, `Publishing`, `GroupEnds`) are given from outside, as small
/// protocols rather than the daemon's concrete objects: the daemon hands them the real ones
/// (`IOQueue`, `HookDispatch`), a unit test hands them fakes and builds a room with no engine,
/// no I/O thread and no hook runner (issue 60, point 6). Only what a room could not be built
/// without is here; the spool store, the item table and the ledger are built as they are, on a
/// temporary spool.

/// Slow file-system work run off the engine thread; its answer comes back to the engine as a
/// message (see `IOQueue`). A test's queue keeps the jobs and runs them when the test says,
/// on its own thread, so what a room submitted and in which order can be looked at.
protocol IOSubmitting: AnyObject {
    func submit(_ work: @escaping @Sendable () -> EngineMessage)
}

extension IOQueue: IOSubmitting {}

/// Where an ended group's `--on-group` hook goes (see `HookDispatch.groupEnded`): it runs
/// holding the group's journal, which goes once the hook has run.
protocol GroupHookStarting: AnyObject {
    func groupEnded(journal: HeldLock, markerPath: String, group: String, request: String, items: Int, failed: Int,
                    owner: String?)
}

extension HookDispatch: GroupHookStarting {}
