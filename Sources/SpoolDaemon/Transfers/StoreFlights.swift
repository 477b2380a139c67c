import Foundation
import SpoolStore

/// This worker's fetches for the content store (`ContentStoreRoom`), by digest, with their
/// spool-wide claims: a flight's claim is renewed every lease period while its fetch runs and
/// released when the flight ends — its ingest done, its item gone, the daemon exiting — so no
/// claim of this process outlives its fetch. Kept apart from the room so that a claim is taken
/// and let go in one place.
struct StoreFlights {
    /// A fetch of this worker for a digest, by the item that runs it.
    struct Flight {
        let key: Int
        let item: String
        /// Its body is published; the ingest is on the I/O queue (waiters wait for that, not for the item).
        var ingesting = false
        /// Claimed on the spool (released when the flight ends).
        var claimed: Bool
        var refreshedAt: Date
    }

    private var byDigest: [String: Flight] = [:]
    private let claims: StoreClaims

    init(claims: StoreClaims) { self.claims = claims }

    subscript(digest: String) -> Flight? { byDigest[digest] }

    /// Whether a flight still fetches (not only ingests): its claim needs renewing.
    var anyFetching: Bool { byDigest.contains { !$0.value.ingesting } }

    /// Item `key` fetches `digest` (claimed on the spool or not).
    mutating func begin(_ digest: String, key: Int, item: String, claimed: Bool) {
        byDigest[digest] = Flight(key: key, item: item, claimed: claimed, refreshedAt: Date())
    }

    /// Item `key`'s body of `digest` goes into the store: true when it is that flight's (which
    /// then waits for the ingest), false for another item's body of the digest.
    mutating func ingesting(_ digest: String, by key: Int) -> Bool {
        guard byDigest[digest]?.key == key else { return false }
        byDigest[digest]?.ingesting = true
        return true
    }

    /// The flight of `digest` ends; its claim goes.
    mutating func end(_ digest: String) {
        guard let flight = byDigest.removeValue(forKey: digest) else { return }
        if flight.claimed { claims.release(digest) }
    }

    /// At exit: every flight ends (another worker fetches at once instead of waiting out a lease).
    mutating func endAll() {
        for digest in Array(byDigest.keys) { end(digest) }
    }

    /// The fetching flights: those whose item `gaveUp` end, the others' claims are renewed when a
    /// lease period has passed since they last were.
    mutating func check(now: Date, leasePeriod: Double, gaveUp: (Flight) -> Bool) {
        for (digest, flight) in byDigest where !flight.ingesting {
            if gaveUp(flight) {
                end(digest)
            } else if flight.claimed, now.timeIntervalSince(flight.refreshedAt) >= leasePeriod {
                claims.refresh(digest)
                byDigest[digest]?.refreshedAt = now
            }
        }
    }
}
