import Foundation
import SpoolCore
import SpoolStore

/// The staging folder as the journal keeper's port: removing journals is all it does there.
final class StagingJournals: JournalPorts {
    private let staging: Directory
    init(staging: Directory) { self.staging = staging }
    func removeJournals(_ names: [String]) { staging.removeAll(names) }
}

/// Which journals may go, and when, for this worker: the rules are the core's `JournalKeeper`
/// (which the seeded simulator runs too); here they meet the daemon's records. This worker's
/// batch journals live until every request they mention has ended its group; the journals of
/// dead workers, read when their requests are adopted, live until every adopted request has
/// ended. Only a journal's name is kept (no descriptor): the worker's own folder lock says it is live.
final class JournalLedger {
    let keeper: JournalKeeper<ItemState, StagingJournals>

    init(staging: Directory) { keeper = JournalKeeper(ports: StagingJournals(staging: staging)) }

    /// States from dead workers' journals, by staging base: consulted when recovering adopted items.
    var deadStates: [String: ItemState] { keeper.deadStates }

    /// Merges what dead workers' journals say (read by the store). Where both name an item,
    /// `preferring(new, old)` picks the record to go by (`SpoolStore.preferringPublished`).
    func learn(states: [String: ItemState], files: [String], preferring: (ItemState, ItemState) -> ItemState) {
        keeper.learn(states: states, files: files, preferring: preferring)
    }

    /// `count` requests were adopted (their names are known; they are read and parsed later):
    /// the dead journals stay until each of them has ended or was dropped.
    func expectAdoptions(_ count: Int) { keeper.expectAdoptions(count) }

    /// An adopted request was taken in (counted already by `expectAdoptions`).
    func adopted(_ request: RequestRecord) { request.adopted = true }

    /// An adopted request could not be taken in (unreadable, rejected): it needs no journal.
    func adoptionDropped() { keeper.adoptionDropped() }

    /// Ties each batch journal to the requests whose items it records (`items`: each result's
    /// item, nil for one that ended meanwhile).
    func attach(_ results: [PublishResult], items: [ItemRecord?]) {
        var names: [String] = []
        for (result, record) in zip(results, items) {
            guard let file = result.journal else { continue }
            if !names.contains(file.name) { names.append(file.name) }
            guard let request = record?.request else { continue }
            keeper.attach(file.name, to: &request.journals)
        }
        keeper.batchAttached(names)
    }

    /// A journal this worker wrote for one request alone (its items found published when it was
    /// adopted): it lives until that request's group ends.
    func attach(_ file: JournalFile, to request: RequestRecord) {
        keeper.attach(file.name, to: &request.journals)
    }

    /// The request's group ended: its journals may go once no other open request needs them.
    func release(_ request: RequestRecord) {
        keeper.release(&request.journals, adopted: request.adopted)
    }

    /// Once every adopted request has ended, the dead workers' journals have told all they can.
    func forgetDeadIfSpent() { keeper.forgetDeadIfSpent() }
}
