import Foundation
import Logging
import SpoolStore

/// This worker's content-store counters (hits, bytes not fetched) for the metrics and
/// `spoolfetch store`: kept apart from `ContentStoreRoom` because they outlive the process — saved
/// in `store/counters/WORKER` at most once a second while they change and at exit, and taken over
/// from this machine's workers that are gone.
struct StoreCounters {
    private(set) var hits = 0
    private(set) var bytesSaved: Int64 = 0
    /// Changed since last saved.
    private var changed = false
    private let worker: String

    init(worker: String) { self.worker = worker }

    /// Counts taken over from gone workers of this machine (at start).
    mutating func takeOver(_ counters: ContentStore.Counters) {
        hits = counters.hits
        bytesSaved = counters.bytesSaved
    }

    /// A hit of `bytes`. True when the counters were saved until now: the caller schedules a save.
    mutating func hit(bytes: Int64) -> Bool {
        hits += 1
        bytesSaved += bytes
        defer { changed = true }
        return !changed
    }

    /// Writes the counters to `store` if they changed (a failure is logged: they are kept in memory).
    mutating func saveIfChanged(to store: ContentStore, logger: Logger) {
        guard changed else { return }
        changed = false
        do {
            try store.save(ContentStore.Counters(hits: hits, bytesSaved: bytesSaved), worker: worker)
        } catch {
            logger.warning("could not write the store's counters: \(error)")
        }
    }
}
