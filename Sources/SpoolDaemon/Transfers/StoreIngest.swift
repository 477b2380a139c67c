import Foundation
import Logging
import SpoolStore

/// A published body going into the content store (`ContentStoreRoom.published`), run on the I/O
/// queue: ingested (verified against its digest, linked or copied in), then the store bounded to
/// `store-max` — eviction lists the store, so it too stays off the engine's thread — and the room
/// told with `EngineMessage.storeIngested`. What the answer changes in the room's totals and log
/// is here as well, so the ingest's outcome is read in one place.
struct StoreIngest: Sendable {
    let store: ContentStore
    let part: StagingFile
    let bytes: Int64
    let digest: String
    /// The fetching item's key when this body ends its flight (see `StoreFlights.ingesting`).
    let flight: Int?
    let maxBytes: Int64
    /// Digests being published from the store now: never evicted meanwhile.
    let inUse: Set<String>

    /// The I/O queue's work.
    func run() -> EngineMessage {
        do throws(StoreError) {
            let outcome = try store.ingest(from: part.fd, sourcePath: "staging/\(part.base).part", bytes: bytes, sha256: digest)
            // Bounded after each entry added; off the engine's thread (it lists the store).
            let evicted = maxBytes > 0 ? store.evict(toFit: maxBytes, inUse: inUse) : []
            let totals = maxBytes > 0 ? store.totals() : nil
            return .storeIngested(digest: digest, flight: flight, outcome: outcome, evicted: evicted.count,
                                  totals: totals.map { StoreTotals(entries: $0.entries, bytes: $0.bytes) }, error: nil)
        } catch {
            return .storeIngested(digest: digest, flight: flight, outcome: nil, evicted: 0, totals: nil, error: error)
        }
    }

    /// The store's totals after an ingest: as counted on the I/O queue (after an eviction), else
    /// `totals` with an added entry's size.
    static func totals(_ totals: StoreTotals, after outcome: ContentStore.IngestOutcome?, of digest: String,
                       counted: StoreTotals?, in store: ContentStore) -> StoreTotals {
        if let counted { return counted }
        guard case .added = outcome, let size = store.size(of: digest) else { return totals }
        return StoreTotals(entries: totals.entries + 1, bytes: totals.bytes + size)
    }

    static func log(digest: String, outcome: ContentStore.IngestOutcome?, evicted: Int, error: StoreError?, logger: Logger) {
        if evicted > 0 { logger.info("store entries removed to stay under store-max", metadata: ["entries": "\(evicted)"]) }
        if let error {
            logger.warning("could not put a body into the store: \(error)", metadata: ["sha256": "\(digest)"])
        } else if case .added(let method) = outcome {
            logger.debug("body put into the store", metadata: ["sha256": "\(digest)", "copy": "\(method.rawValue)"])
        }
    }
}
