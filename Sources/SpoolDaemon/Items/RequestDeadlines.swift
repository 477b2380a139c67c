import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// When claimed requests' `deadline:` passes: one timer per request (its file-level deadline, or
/// the daemon's `--deadline`) plus one per item that gives its own. A request without a deadline
/// costs nothing here. At its time the loop sends each item it covers `deadlinePassed`, which
/// ends it (failed, code `deadline`) whatever it waits for; ended items ignore it.
final class RequestDeadlines {
    struct Due {
        let request: String
        /// The claimed file's inode: a later request that took the same name is not this one.
        let inode: UInt64
        let at: Date
        /// nil: every item of the request but `except` (those give their own deadline).
        let index: Int?
        let except: Set<Int>

        func covers(_ item: Int) -> Bool { index.map { $0 == item } ?? !except.contains(item) }
    }

    private var timers = DueTimers<Due>()
    private let byDefault: RequestDeadline?

    init(byDefault: RequestDeadline?) {
        self.byDefault = byDefault
    }

    var next: Date? { timers.next }

    /// Sets the request's timers. A time from the claim counts from when the request file was
    /// claimed — for an adopted one, the claim its first worker made (the file's change time).
    func schedule(_ index: RequestIndex, claim: ClaimedRequest, adopted: Bool, now: Date) {
        let whole = index.settings.deadline ?? byDefault
        guard whole != nil || !index.itemDeadlines.isEmpty else { return }
        let claimed = adopted ? (claim.changeTime() ?? now) : now
        if let whole {
            timers.add(Due(request: claim.name, inode: claim.inode, at: whole.date(claimedAt: claimed), index: nil,
                           except: Set(index.itemDeadlines.keys)), at: whole.date(claimedAt: claimed))
        }
        for (item, deadline) in index.itemDeadlines.sorted(by: { $0.key < $1.key }) {
            let at = deadline.date(claimedAt: claimed)
            timers.add(Due(request: claim.name, inode: claim.inode, at: at, index: item, except: []), at: at)
        }
    }

    /// The deadlines passed at `now`.
    func takeDue(now: Date) -> [Due] { timers.takeDue(now: now) }
}
