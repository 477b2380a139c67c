import SpoolRequest
import SpoolTransfer

/// How URLs appear in what the daemon leaves behind — markers, error files, group markers,
/// staging states, status reports and log lines: without their query by default, because a signed
/// URL's query is a credential and these files outlive it in the spool (and in backups of it).
/// A marker still lets a consumer match its URL: `urlQuerySha256` is the query's digest.
/// `--keep-url-queries yes` writes URLs whole. Hooks get the whole URL: they are handed it, it is
/// not written down.
struct URLPrivacy: Sendable, Hashable {
    var keepsQueries: Bool

    init(keepsQueries: Bool = false) { self.keepsQueries = keepsQueries }

    /// The URL as the daemon writes it down.
    func shown(_ url: String) -> String { keepsQueries ? url : URLQuery.stripped(url) }

    func shown(_ url: String?) -> String? {
        guard let url else { return nil }
        return keepsQueries ? url : URLQuery.stripped(url)
    }

    /// The lowercase hex SHA-256 of the URL's query (its text after `?`, before any `#`); nil
    /// when the URL has none.
    static func querySHA256(_ url: String) -> String? {
        guard let query = URLQuery.query(of: url) else { return nil }
        var hash = HashState()
        let bytes = Array(query.utf8)
        bytes.withUnsafeBytes { hash.update($0) }
        return hash.hexDigest
    }
}
