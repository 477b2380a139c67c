import Foundation
import SpoolCore
import SpoolStore

/// A publish batch's journal this worker wrote, kept while any request it mentions is still
/// open: after a crash it is what tells an adopter that an item was already published. Only its
/// name is kept (no descriptor): the worker's own folder lock says it is live.
final class BatchJournal {
    let file: JournalFile
    /// Requests it mentions whose group has not ended.
    var openRequests = 0

    init(file: JournalFile) { self.file = file }
}

/// Which journals may go, and when: this worker's batch journals live until every request they
/// mention has ended its group; the journals of dead workers, read when their requests are
/// adopted, live until every adopted request has ended.
final class JournalLedger {
    private let staging: Directory
    /// States from dead workers' journals, by staging base: consulted when recovering adopted items.
    private(set) var deadStates: [String: ItemState] = [:]
    private var deadFiles: [String] = []
    /// Adopted requests whose group has not ended.
    private var adoptedOpen = 0

    init(staging: Directory) { self.staging = staging }

    /// Merges what dead workers' journals say (read by the store). Where both name an item,
    /// `preferring(new, old)` picks the record to go by (`SpoolStore.preferringPublished`).
    func learn(states: [String: ItemState], files: [String], preferring: (ItemState, ItemState) -> ItemState) {
        deadStates.merge(states) { old, new in preferring(new, old) }
        for file in files where !deadFiles.contains(file) { deadFiles.append(file) }
    }

    /// `count` requests were adopted (their names are known; they are read and parsed later):
    /// the dead journals stay until each of them has ended or was dropped.
    func expectAdoptions(_ count: Int) { adoptedOpen += count }

    /// An adopted request was taken in (counted already by `expectAdoptions`).
    func adopted(_ request: RequestRecord) { request.adopted = true }

    /// An adopted request could not be taken in (unreadable, rejected): it needs no journal.
    func adoptionDropped() {
        adoptedOpen -= 1
        forgetDeadIfSpent()
    }

    /// Ties each batch journal to the requests whose items it records.
    func attach(_ results: [PublishResult], requestOf: (String) -> RequestRecord?) {
        var batch: [ObjectIdentifier: BatchJournal] = [:]
        for result in results {
            guard let file = result.journal else { continue }
            let journal = batch[ObjectIdentifier(file)] ?? BatchJournal(file: file)
            batch[ObjectIdentifier(file)] = journal
            guard let request = requestOf(result.base),
                  !request.journals.contains(where: { $0 === journal }) else { continue }
            request.journals.append(journal)
            journal.openRequests += 1
        }
        for journal in batch.values where journal.openRequests == 0 { staging.remove(journal.file.name) }
    }

    /// A journal this worker wrote for one request alone (its items found published when it was
    /// adopted): it lives until that request's group ends.
    func attach(_ file: JournalFile, to request: RequestRecord) {
        let journal = BatchJournal(file: file)
        journal.openRequests = 1
        request.journals.append(journal)
    }

    /// The request's group ended: its journals may go once no other open request needs them.
    func release(_ request: RequestRecord) {
        var spent: [String] = []
        for journal in request.journals {
            journal.openRequests -= 1
            if journal.openRequests == 0 { spent.append(journal.file.name) }
        }
        staging.removeAll(spent)
        request.journals = []
        if request.adopted {
            adoptedOpen -= 1
            forgetDeadIfSpent()
        }
    }

    /// Once every adopted request has ended, the dead workers' journals have told all they can.
    func forgetDeadIfSpent() {
        guard adoptedOpen == 0, !deadFiles.isEmpty else { return }
        staging.removeAll(deadFiles)
        deadFiles = []
        deadStates = [:]
    }
}
