import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolStore

/// The daemon as the ports of an adopted request's acceptance (`AdoptedIntake`, the core's, which
/// the simulator's workers run too): the item table, the disk's recovery of each item
/// (`Recovery`), the request's cancel record, and the journal ledger. One per adopted request
/// file; it keeps the request it recorded for `Intake.accept` to hand on.
final class AdoptedIntakeShell: AdoptedIntakePorts {
    private let store: SpoolStore
    private let logger: Logger
    private let ledger: JournalLedger
    private let table: ItemTable
    private let recovery: Recovery
    private let claim: ClaimedRequest
    private let now: Date
    /// The request as `add` recorded it.
    private(set) var request: RequestRecord?

    init(store: SpoolStore, logger: Logger, ledger: JournalLedger, table: ItemTable, recovery: Recovery,
         claim: ClaimedRequest, now: Date) {
        self.store = store; self.logger = logger; self.ledger = ledger; self.table = table
        self.recovery = recovery; self.claim = claim; self.now = now
    }

    func add(_ index: RequestIndex) -> [ItemRecord] {
        let request = table.add(claim: claim, index: index) { [now] _ in ItemLifecycle(firstQueued: now) }
        self.request = request
        return request.items
    }

    func adopted() { if let request { ledger.adopted(request) } }
    func adoptionDropped() { ledger.adoptionDropped() }
    /// The operator cancelled the whole request before the crash (`recordCancel`).
    func cancelled() -> Bool { store.cancelRecord(of: claim) != nil }
    func recoverUpload(_ record: ItemRecord) -> Bool { recovery.recoverUpload(record) }

    func recover(_ record: ItemRecord) -> AdoptedRecovery<ItemState> {
        switch recovery.recover(record, deadStates: ledger.deadStates) {
        case .schedule: return .schedule
        case .ended(let confirm): return .ended(confirm: confirm)
        case .publish: return .publish
        }
    }

    func endCancelled(_ record: ItemRecord) {
        record.recover(.failed(ItemFailed(code: "cancelled", message: "cancelled by the operator", attempts: record.attempts,
                                          facts: ItemFailureFacts(index: record.index, url: "", name: ""))),
                       attempts: record.attempts)
    }

    /// Not synced: a power cut may lose it, and those items are then delivered again.
    func journal(_ confirmed: [ItemState]) {
        guard let request else { return }
        do {
            let journal = try store.writeJournal(confirmed)
            journal.closeDescriptor()
            ledger.attach(journal, to: request)
        } catch {
            logger.warning("could not journal the items found published; a consumer taking them before a crash would get them again: \(error)",
                           metadata: ["request": "\(claim.name)"])
        }
    }
}
