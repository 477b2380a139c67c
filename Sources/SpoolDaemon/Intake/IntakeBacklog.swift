import Foundation
import SpoolCore
import SpoolStore

/// Request files known to the engine but not taken in yet: names from a listing of `incoming/`
/// (the watcher's first listing, an inotify overflow, a rescan) and requests adopted from dead
/// workers. The engine takes them in a few milliseconds' worth per turn (`Intake.takeIn`),
/// between which it routes its inbox and runs its transfers: so a worker started on a million
/// waiting requests is ready at once, and a request dropped meanwhile — claimed from its inotify
/// event, never queued here — starts within a turn rather than after the million.
///
/// A plain FIFO: names are taken in the order they were listed.
struct IntakeBacklog {
    enum Entry {
        /// A name in `incoming/` to claim.
        case incoming(String)
        /// A request now this worker's, to read, parse and recover.
        case adopted(AdoptedClaim)
    }

    private var entries: [Entry] = []
    private var head = 0

    var isEmpty: Bool { head == entries.count }
    var count: Int { entries.count - head }

    mutating func append(_ entry: Entry) { entries.append(entry) }
    mutating func append(contentsOf more: some Sequence<Entry>) { entries.append(contentsOf: more) }

    /// The oldest entry; the storage is given back once the backlog runs dry.
    mutating func next() -> Entry? {
        guard head < entries.count else { return nil }
        let entry = entries[head]
        head += 1
        if head == entries.count {
            entries = []
            head = 0
        } else if head >= 65_536 && head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
        return entry
    }

    /// How long one turn may spend on the backlog: short enough that a request dropped meanwhile
    /// is claimed and started within a turn or two, long enough that the per-turn work (a poll of
    /// the transfer session) is small beside it.
    static let turnBudget: Double = 0.02
}
