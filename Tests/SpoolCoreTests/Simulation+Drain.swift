import Foundation
import SpoolCore
import SpoolScheduler

/// A drain's watcher (`run --once`, `DrainWatch`) as a look at each worker: every worker carries
/// the core's `DrainWatch`, fed at the end of each turn with "only endings left" as
/// `Engine.tendWatcher` computes it (nothing queued or in the scheduler, no item running,
/// retrying, waiting for space or paused); a stop is delivered at the worker's next turn, or (drawn
/// aside) not at all. Checked: the watcher is let go only when every item the worker holds is
/// publishing or ended and nothing else can move one (no transfer, no refresh, no store wait, no
/// space wait); until new work comes, no operator command changes an item but a `cancel` that
/// takes back a publish no batch holds yet (`DrainWatch`'s premise: the rest has nothing to act on,
/// and that cancel still reaches the drain by its rescans or last listing, only later).
final class SimDrainLook {
    var watch = DrainWatch(enabled: true)
    var stopPending = false
    /// Operator commands that changed an item after the watcher was let go (counted, reported).
    var lateCommandsThatActed = 0
}

extension SimDaemon {
    func tendDrainWatch() {
        guard world.drainOn else { return }
        if drain.stopPending {
            drain.stopPending = false
            drain.watch.watcherStopped()
        }
        let onlyEndingsLeft = scheduler.isIdle && spaceQueue.waiting.isEmpty && machines.values.allSatisfy {
            switch $0.phase {
            case .publishing, .waitingToPublish, .published, .failed: return true
            default: return false
            }
        }
        switch drain.watch.turn(onlyEndingsLeft: onlyEndingsLeft) {
        case .none: break
        case .stopWatcher:
            if let why = drainStopBreaks() { violation = "the drain let its watcher go while \(why)" }
            if world.sideChance(0.1, "drain stop \(name) \(world.trace.count)") {
                drain.watch.stopNotDelivered()
                world.log("\(name): drain watcher stop not delivered")
            } else {
                drain.stopPending = true
                world.log("\(name): drain lets its watcher go (only endings left)")
            }
        case .startRescans:
            world.log("\(name): drain goes on after the watcher stopped: rescans")
        }
    }

    /// Why letting the watcher go now would be wrong: something the worker holds can still move
    /// without an ending (nil: nothing).
    private func drainStopBreaks() -> String? {
        if world.store != nil, !storeRoom.waitingKeys.isEmpty { return "items wait for a fetch of the store: \(storeRoom.waitingKeys.sorted())" }
        if !hitReads.isEmpty { return "hits are being read from the store: \(hitReads.keys.sorted())" }
        if let (id, _) = machines.first(where: { isTransferring($0.key) }) { return "item \(id) transfers" }
        if scheduler.holds(machines.keys.first { scheduler.holds($0) } ?? -1) { return "the scheduler holds an item" }
        return nil
    }

    /// After an operator command: one that changed an item once the watcher was let go.
    func drainSawCommand(_ effects: [ItemEffect<SimPart, SimJob>], item id: Int) {
        guard world.drainOn, drain.watch.phase != .watching || drain.stopPending, !effects.isEmpty else { return }
        drain.lateCommandsThatActed += 1
        world.log("\(name): a command acted on item \(id) after the drain let its watcher go (\(drain.watch.phase))")
        // Before any new work came (rescans start only then), a command has nothing to act on
        // but a cancel that withdraws a publish: `DrainWatch`'s premise, which lets a drain exit
        // with no watcher (seed 1,347 of the store survey: cancel of a publishing item).
        if effects == [.withdrawPublish] { return }
        if drain.watch.phase == .stopping || drain.watch.phase == .stopped {
            violation = "a command acted on item \(id) while only endings were left (the drain's watcher \(drain.watch.phase))"
        }
    }
}
