import Foundation
import SpoolCore
import Logging
import SpoolStore

/// An operator's command for a whole request (`spoolfetch cancel|pause|resume|retry REQUEST`):
/// carried out at once for all its items, answered once, logged once (the control command's
/// line, with the counts), whatever the request's size.
///
/// Why: a request of 200,000 waiting items cancelled item by item took over 10 s, logged 200,000
/// lines and wrote a state file for each. Its items that never started (waiting in the queue, or
/// paused before their first start: nothing of them on disk) are ended by their machine with a
/// failure record that names only their index — their URL is read again when the group end
/// writes them — and with no state file each: one cancel record for the request
/// (`SpoolStore.recordCancel`), written and synced before anything changes, is what a restart
/// honours instead. Every item goes through the executor (`executor.send`); a never-started
/// one's ending is quiet (`ItemShell.QuietEnding`).
extension Engine {
    /// Carries out `verb` for every item of `request` and answers; nil to leave the command to
    /// the item-by-item path (a `retry` of a request of no more than `listedFailuresLimit` items,
    /// whose answers name each item's state).
    func requestCommand(_ verb: ControlCommand.Verb, on request: RequestRecord, caller: String) -> ControlResult? {
        if verb == .retry && request.items.count <= SpoolStore.listedFailuresLimit { return nil }
        let now = Date()
        if verb == .cancel, request.items.contains(where: Self.endsUnstarted) {
            do {
                try store.recordCancel(request.claim, at: now, caller: caller)
            } catch {
                return ControlResult(ok: false, message: "could not record the cancel of \(request.name), so nothing was cancelled: \(error)",
                                     items: [])
            }
        }
        var acted: [String] = []
        var actedCount = 0
        var actedStates: [String: Int] = [:]
        var otherStates: [String: Int] = [:]
        var after: Set<String> = []
        var endedUnstarted = 0
        let causes = CauseSharing()
        for record in request.items {
            let before = record.phase.label
            let changed: Bool
            if verb == .cancel, Self.endsUnstarted(record) {
                endedUnstarted += 1
                // Counted in one step: a counter update per item cost more than the rest of its ending.
                if endedUnstarted == 1 {
                    operators.metrics.metrics.itemsEnded(outcome: "failed", code: "cancelled",
                                                         count: request.items.lazy.filter(Self.endsUnstarted).count)
                }
                // Its machine decides (`unschedule` and the failure) through the executor; the
                // ending is quiet (`ItemShell.QuietEnding`).
                changed = !(executor.ports.endingQuietly(causes: causes, now: now) {
                    executor.send(.operatorCommand(.cancel), to: record)
                } ?? []).isEmpty
                after.insert(record.phase.label)
            } else {
                // `retry` starts a waiting item now: the operator also wins over a 429/503 hold.
                if verb == .retry, record.phase == .retrying { hosts.scheduler.releaseHold(record.hostKey) }
                changed = !(executor.send(.operatorCommand(OperatorVerb(verb)), to: record) ?? []).isEmpty
                after.insert(record.phase.label)
            }
            if changed {
                actedCount += 1
                actedStates[before, default: 0] += 1
                if acted.count < SpoolStore.listedFailuresLimit { acted.append(record.id) }
            } else {
                otherStates[before, default: 0] += 1
            }
        }
        operators.status.dirty = true
        let state = after.count == 1 ? after.first : nil
        let word = verb.rawValue
        guard actedCount > 0 else {
            return ControlResult(ok: false, message: "nothing to \(word): the \(request.items.count) item(s) of \(request.name) are "
                                 + Self.counted(otherStates), items: [], state: state)
        }
        var message = "\(word): \(actedCount) item(s) of \(request.name) (\(Self.counted(actedStates)))"
        if !otherStates.isEmpty { message += "; left as they were: " + Self.counted(otherStates) }
        return ControlResult(ok: true, message: message, items: acted, state: state)
    }

    /// An item a request's cancel ends without the item-by-item path: it waits (queued, or
    /// paused before it ever started) and holds nothing of a transfer — no part, no state file,
    /// no failure to report.
    private static func endsUnstarted(_ record: ItemRecord) -> Bool {
        (record.phase == .queued || record.phase == .paused) && !record.holdsTransferState
    }

    /// `3 queued, 1 running`: counts by state, the largest first.
    private static func counted(_ states: [String: Int]) -> String {
        states.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
            .map { "\($0.value) \($0.key)" }.joined(separator: ", ")
    }
}
