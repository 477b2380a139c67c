/// What a journal keeper removes: the one thing it does to the spool.
public protocol JournalPorts: AnyObject {
    /// Removes these publish journals from staging (their names, unique in the spool).
    func removeJournals(_ names: [String])
}

/// Which publish journals may go, and when: the rules of the daemon's `JournalLedger`, which the
/// seeded simulator's workers run as well, so that a journal removed too early (and a crash
/// after) shows up there as an item fetched or published again.
///
/// - A batch's journal is attached to every open request it records an item of, once each, and
///   removed when the last of them has ended its group (its count reaches 0) — not when the
///   first does: after a crash it is what tells an adopter that the other requests' items were
///   published. A batch whose requests are all gone already goes at once.
/// - The journals of dead workers, read when their requests are adopted, stay until every
///   adopted request has ended (or was dropped): an adopted item is recovered from them, and a
///   later crash of this worker must find them again.
///
/// Each request keeps the names of its journals itself (`inout [String]`: the daemon in its
/// record, the simulator in a table), the keeper only the counts.
public final class JournalKeeper<State, Ports: JournalPorts> {
    public let ports: Ports
    /// Open requests that mention each journal, by name.
    public private(set) var openRequests: [String: Int] = [:]
    /// States from dead workers' journals, by staging base: consulted when recovering adopted items.
    public private(set) var deadStates: [String: State] = [:]
    public private(set) var deadFiles: [String] = []
    /// Adopted requests whose group has not ended.
    public private(set) var adoptedOpen = 0

    public init(ports: Ports) { self.ports = ports }

    /// Merges what dead workers' journals say. Where both name an item, `preferring(new, old)`
    /// picks the record to go by (`RecoverySpool.preferringPublished`).
    public func learn(states: [String: State], files: [String], preferring: (State, State) -> State) {
        deadStates.merge(states) { old, new in preferring(new, old) }
        for file in files where !deadFiles.contains(file) { deadFiles.append(file) }
    }

    /// `count` requests were adopted: the dead journals stay until each of them has ended or was dropped.
    public func expectAdoptions(_ count: Int) { adoptedOpen += count }

    /// An adopted request could not be taken in (unreadable, rejected): it needs no journal.
    public func adoptionDropped() {
        adoptedOpen -= 1
        forgetDeadIfSpent()
    }

    /// Ties `journal` to a request that is open (its list `journals`); once per request.
    public func attach(_ journal: String, to journals: inout [String]) {
        // The batch's journal is nearly always the one attached last: one comparison, where a
        // search of a long-lived request's list cost 40 string comparisons an item.
        guard journals.last != journal, !journals.contains(journal) else { return }
        journals.append(journal)
        openRequests[journal, default: 0] += 1
    }

    /// A batch's journals are attached: those no open request mentions go now.
    public func batchAttached(_ journals: [String]) {
        var spent: [String] = []
        for journal in journals where openRequests[journal] == nil && !spent.contains(journal) { spent.append(journal) }
        if !spent.isEmpty { ports.removeJournals(spent) }
    }

    /// A request's group ended (its journals `journals`; `adopted`: it was taken over from a dead
    /// worker): each of its journals goes once no other open request mentions it.
    public func release(_ journals: inout [String], adopted: Bool) {
        var spent: [String] = []
        for journal in journals {
            guard let open = openRequests[journal] else { continue }
            if open <= 1 {
                openRequests.removeValue(forKey: journal)
                spent.append(journal)
            } else {
                openRequests[journal] = open - 1
            }
        }
        journals = []
        if !spent.isEmpty { ports.removeJournals(spent) }
        if adopted {
            adoptedOpen -= 1
            forgetDeadIfSpent()
        }
    }

    /// Once every adopted request has ended, the dead workers' journals have told all they can.
    public func forgetDeadIfSpent() {
        guard adoptedOpen <= 0, !deadFiles.isEmpty else { return }
        ports.removeJournals(deadFiles)
        deadFiles = []
        deadStates = [:]
    }
}
