import Foundation
import SpoolStore

/// `spoolfetch store` and `spoolfetch store verify`: what the content store holds, read from its
/// folder (no daemon needed), and its entries hashed again.
public enum StoreReport {
    public struct Summary: Codable, Sendable, Hashable {
        public let path: String
        public let entries: Int
        public let bytes: Int64
        /// Items published from the store, by every worker that used it.
        public let hits: Int
        public let bytesSaved: Int64
        /// Why this store was read (see `StoreLocation`); nil when the caller did not say.
        public var source: String? = nil
    }

    /// The store at `path` (made when missing: an empty store is a valid answer).
    public static func summary(path: String) throws(StoreError) -> Summary {
        let store = try ContentStore(path: path)
        let entries = store.entries()
        let counters = store.counters()
        return Summary(path: path, entries: entries.count, bytes: entries.reduce(0) { $0 + $1.bytes },
                       hits: counters.hits, bytesSaved: counters.bytesSaved)
    }

    /// One line: `/var/spool/x/store: 10 entries, 1.2M; 50 hits, 3.4M not fetched`.
    public static func line(_ s: Summary) -> String {
        "\(s.path): \(s.entries) entries, \(SpoolOverview.human(s.bytes)) (\(s.bytes) bytes); "
            + "\(s.hits) hits, \(SpoolOverview.human(s.bytesSaved)) not fetched (\(s.bytesSaved) bytes)"
    }

    /// Hashes every entry again; removes those whose bytes do not hash to their name. The lines
    /// to print and whether the store was whole.
    public static func verify(path: String) throws(StoreError) -> (lines: [String], whole: Bool) {
        let store = try ContentStore(path: path)
        let result = store.verify()
        var lines = result.mismatches.map {
            "removed \(ContentStore.entryName($0.digest)): its \($0.bytes) bytes hash to \($0.found)"
        }
        lines += result.errors.map { "could not check: \($0)" }
        lines.append("checked \(result.checked) entries: \(result.mismatches.count) removed, \(result.errors.count) unreadable")
        return (lines, result.mismatches.isEmpty && result.errors.isEmpty)
    }
}
