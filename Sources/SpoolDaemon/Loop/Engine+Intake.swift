import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolStore

/// The engine's side of intake: the counts, and each accepted item's first event.
extension Engine {
    /// Claims the request file `name` in `incoming/` and accepts it.
    func claim(_ name: String) {
        guard !runState.stopping else { return }
        switch intake.claim(name) {
        case .claimed(let claim):
            let now = Date()
            accepted(intake.accept(claim, adopted: false, now: now), claim, adopted: false, now: now)
        case .rejected:
            runState.summary.rejected += 1
            operators.metrics.metrics.requestRejected()
        case .failed:
            runState.summary.unclaimed += 1
            runState.drain.claimFailed(name)
        case .none: break
        }
    }

    /// Takes in what the intake backlog holds, a turn's worth.
    func takeInBacklog() {
        guard !intake.backlogIsEmpty else { return }
        intake.takeIn(stopping: runState.stopping, claim: claim, accept: {
            let now = Date()
            accepted(intake.accept($0, adopted: true, now: now), $0, adopted: true, now: now)
        },
                      groupPending: hooks.groupPending)
        operators.status.dirty = true
    }

    /// What intake made of a claimed (or adopted) request (`Intake.accept`, asked by the caller):
    /// counted, and each item sent its first event in file order — queued, ended (found so by a
    /// recovery), or handed to the publisher.
    func accepted(_ acceptance: Intake.Acceptance, _ claim: ClaimedRequest, adopted: Bool, now: Date) {
        switch acceptance {
        case .rejected:
            runState.summary.rejected += 1
            operators.metrics.metrics.requestRejected()
        case .unreadable:
            runState.summary.unclaimed += 1
        case .accepted(let accepted):
            if !adopted {
                operators.metrics.metrics.requestClaimed()
                // Only a request with expiring URLs has anything to warn of.
                if hooks.refreshHook == nil, !accepted.index.expiryNotes.isEmpty, let warning = ExpiryWarning(accepted.index, request: claim.name,
                                                                        window: hosts.scheduler.configuration.window,
                                                                        now: now, logger: logger) {
                    operators.status.noteExpiryWarning(warning.text)
                }
            }
            let request = accepted.request
            logger.debug("claimed a request", metadata: ["request": "\(claim.name)", "items": "\(request.items.count)",
                                                         "group": "\(request.group)"])
            // The core's order, the simulator's too: first steps, the deadlines only while the
            // group has open items, the group taken.
            let ports = RequestStartShell(engine: self, request: request, index: accepted.index, claim: claim, adopted: adopted, now: now)
            if let recovered = accepted.recovered {
                RequestStart.start(adopted: recovered, ports: ports)
            } else {
                RequestStart.start(fresh: request.items, ports: ports)
            }
        }
    }
}

/// The engine as the ports of an accepted request's start (`RequestStart`): an item queued through
/// the executor, counted as ended through its shell, or its job handed to the publishing room;
/// the request's deadlines; its group told `.taken` (a request with nothing left to end ends
/// now, else it sleeps once the turn is over).
private struct RequestStartShell: RequestStartPorts {
    unowned let engine: Engine
    let request: RequestRecord
    let index: RequestIndex
    let claim: ClaimedRequest
    let adopted: Bool
    let now: Date
    func submit(_ record: ItemRecord) { engine.executor.send(.submitted, to: record) }
    func ended(_ record: ItemRecord) { engine.executor.ports.ended(record) }
    func publish(_ record: ItemRecord) {
        engine.items.table.note(record)
        if let job = record.lifecycle.state.job { engine.publishing.enqueue(job) }
    }
    var hasOpenItems: Bool { request.groupEnd.openItems > 0 }
    func scheduleDeadlines() { engine.items.deadlines.schedule(index, claim: claim, adopted: adopted, now: now) }
    func taken() {
        if engine.groupEnds.executor.send(.taken, to: request, now: now)?.isEmpty ?? false { engine.items.table.sleepAtTurnEnd(request) }
    }
}
