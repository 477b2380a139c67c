import Foundation
import Logging
import SpoolStore

/// Taking request files in without stalling the loop: listings and adoptions fill the
/// `IntakeBacklog`, and each turn takes in what fits in `IntakeBacklog.turnBudget`.
extension Engine {
    /// Takes over the requests in `active/` whose worker is gone. Their publish journals are read
    /// after the claims: a worker that died before the scan has released every lock it held, so
    /// all of its journals are readable by then. The requests themselves are read and recovered
    /// from the backlog, after `READY=1`.
    func adoptOrphans(alone: Bool) {
        let claims = store.adoptOrphans()
        if !claims.isEmpty || alone {
            let (states, files) = store.readJournals()
            ledger.learn(states: states, files: files, preferring: store.preferringPublished)
        }
        if !claims.isEmpty {
            logger.notice("adopting the requests of workers that are gone", metadata: ["requests": "\(claims.count)"])
            adoptedStagingNames = Set(layout.staging.list())
            ledger.expectAdoptions(claims.count)
            backlog.append(contentsOf: claims.lazy.map { .adopted($0) })
        }
        ledger.forgetDeadIfSpent()
    }

    /// Names listed in `incoming/` (at start, after an inotify overflow, by a rescan): claimed
    /// from the backlog, oldest first.
    func listed(_ names: [String]) {
        backlog.append(contentsOf: names.lazy.map { .incoming($0) })
    }

    /// Takes in backlog entries until the turn's budget is spent (at least one per turn).
    func takeInBacklog() {
        guard !backlog.isEmpty else { return }
        let deadline = Date().addingTimeInterval(IntakeBacklog.turnBudget)
        while let entry = backlog.next() {
            switch entry {
            case .incoming(let name):
                claim(name)
            case .adopted(let adopted):
                if stopping {
                    // Left where it lies, in a folder this worker holds: the next worker adopts it.
                    ledger.adoptionDropped()
                } else {
                    switch store.takeAdopted(adopted) {
                    case .claim(let claim):
                        logger.debug("adopted a request whose worker is gone", metadata: ["request": "\(claim.name)"])
                        accept(claim, adopted: true)
                    case .filed(let name, let inode):
                        ledger.adoptionDropped()
                        logger.notice("a request whose group had ended was still claimed too (a power cut kept its old name); not worked on again",
                                      metadata: ["request": "\(name)"])
                        if let pending = store.finishFiledGroup(name, inode: inode) { hooks.groupPending(pending) }
                    case .gone:
                        ledger.adoptionDropped()
                    }
                }
            }
            // The clock after every entry: one entry may be a list of 100,000 URLs (half a second).
            if Date() >= deadline { break }
        }
        status.markDirty()
    }
}
