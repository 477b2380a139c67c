import Foundation
import Logging
import SpoolRequest
import SpoolStore

/// The engine's side of intake: what a claimed request becomes — records in the item table,
/// and each item queued, or (adopted) recovered from what the spool says about it.
extension Engine {
    /// Claims the request file `name` in `incoming/` and accepts it.
    func claim(_ name: String) {
        guard !stopping else { return }
        switch intake.claim(name) {
        case .claimed(let claim): accept(claim, adopted: false)
        case .rejected:
            summary.rejected += 1
            metrics.metrics.requestRejected()
        case .failed:
            summary.unclaimed += 1
            drain.claimFailed(name)
        case .none: break
        }
    }

    /// Takes in what the intake backlog holds, a turn's worth.
    func takeInBacklog() {
        guard !intake.backlogIsEmpty else { return }
        intake.takeIn(stopping: stopping, claim: claim, accept: { accept($0, adopted: true) },
                      groupPending: hooks.groupPending)
        status.markDirty()
    }

    /// A claimed (or adopted) request: parsed whole, then each item queued — or, when adopted,
    /// recovered from what the spool says about it.
    func accept(_ claim: ClaimedRequest, adopted: Bool) {
        let index: RequestIndex
        var uploads: [Int: OutgoingIdentity] = [:]
        switch intake.parse(claim, checkUploads: !adopted) {
        case .indexed(let indexed, let found): index = indexed; uploads = found
        case .rejected:
            summary.rejected += 1
            metrics.metrics.requestRejected()
            if adopted { ledger.adoptionDropped() }
            return
        case .unreadable:
            summary.unclaimed += 1
            if adopted { ledger.adoptionDropped() }
            return
        }
        if !adopted { metrics.metrics.requestClaimed() }
        let now = Date()
        if !adopted { warnOfURLsExpiringBeforeStart(index, request: claim.name, now: now) }
        let request = table.add(claim: claim, index: index) { _ in
            ItemLifecycle(firstQueued: now)
        }
        if adopted { ledger.adopted(request) }
        let recovery = intake.recovery
        var confirmed: [ItemState] = []
        for record in request.items {
            if let identity = uploads[record.index] { record.upload.identity = identity }
            guard adopted else { send(.submitted, to: record); continue }
            if recoverUpload(record) { itemEnded(record); continue }
            switch recovery.recover(record, deadStates: ledger.deadStates) {
            case .schedule: send(.submitted, to: record)
            case .ended(let confirm):
                if let confirm { confirmed.append(confirm) }
                itemEnded(record)
            case .publish(let job):
                table.note(record)
                publishing.enqueue(job)
            }
        }
        if !confirmed.isEmpty {
            // Not synced: a power cut may lose it, and those items are then delivered again.
            do {
                let journal = try store.writeJournal(confirmed)
                journal.closeDescriptor()
                ledger.attach(journal, to: request)
            } catch {
                logger.warning("could not journal the items found published; a consumer taking them before a crash would get them again: \(error)",
                               metadata: ["request": "\(claim.name)"])
            }
        }
        logger.debug("claimed a request", metadata: ["request": "\(claim.name)", "items": "\(request.items.count)",
                                                     "group": "\(request.group)"])
        if request.open == 0 { groupEnds.end(request) } else { table.sleepIfWaiting(request) }
    }
}
