import Foundation
import SpoolCore
import SpoolScheduler

/// The status report equals the core's state: after every step, each item of a worker is shown
/// as the daemon's `StatusReporter` shows it (the core's `ItemMachine.status`, with the facts the
/// rooms hold: the scheduler's host waits, the space on the simulated filesystems), and the
/// report is held against what the worker and the world know independently of that rule.
extension SimDaemon {
    func checkStatus() throws {
        let now = world.now
        var shown: [String: Int] = [:]
        var phases: [String: Int] = [:]
        let unreachable = Set(scheduler.hostOutages.map(\.hostKey))
        for (id, machine) in machines.sorted(by: { $0.key < $1.key }) {
            let spec = world.spec(id)
            let space: SpaceShortage? = switch machine.phase {
            case .waitingForSpace: SpaceRules.shortage(needed: spec.bytes, reserved: 0, on: [world.stagingSpace])
            case .waitingToPublish: SpaceRules.publishShortage(bytes: spec.bytes, copies: true, final: world.finalSpace)
            default: nil
            }
            let status = machine.status(ItemStatusFacts(
                now: now, earliestStart: nil, discretionary: false, window: nil, timeZone: TimeZone(identifier: "UTC")!,
                hostKey: spec.host, hostWait: scheduler.hostWait(spec.host, now: now), space: space))
            shown[status.state, default: 0] += 1
            phases[machine.phase.label, default: 0] += 1
            let what = "item \(id) (\(machine.phase.label)) is shown as \(status.state)"
            if status.state != machine.phase.label { throw SimulationError("\(what)") }
            switch machine.phase {
            case .queued, .retrying:
                if unreachable.contains(spec.host) != (status.waitingFor?.contains("host \(spec.host) unreachable") ?? false) {
                    throw SimulationError("\(what), waiting for \(status.waitingFor ?? "nothing named"), while its host is "
                                          + (unreachable.contains(spec.host) ? "held unreachable" : "not held unreachable"))
                }
                if machine.phase == .retrying && status.startsAt == nil {
                    throw SimulationError("\(what) with no time for its next try")
                }
            case .waitingForSpace, .waitingToPublish:
                let folder = machine.phase == .waitingForSpace ? "staging" : "final"
                guard let waits = status.waitingFor else { throw SimulationError("\(what) without saying what space it waits for") }
                if space != nil && !waits.contains("\(folder) (sim)") {
                    throw SimulationError("\(what) waiting for \"\(waits)\", not naming the \(folder) filesystem that is short")
                }
            case .paused:
                if status.waitingFor != ItemStatus.pausedWaitsFor { throw SimulationError("\(what) without naming resume") }
            case .running, .publishing, .published, .failed:
                if status.waitingFor != nil || status.startsAt != nil {
                    throw SimulationError("\(what) waiting for \(status.waitingFor ?? "a time")")
                }
            }
        }
        if shown != phases { throw SimulationError("the report counts \(shown); the items are \(phases)") }
    }
}
