internal import CCurl
import Foundation

/// The system's trust store as libcurl was built to find it, read once a session and not at
/// every connection.
///
/// Debian's libcurl names the store twice: as a bundle (`/etc/ssl/certs/ca-certificates.crt`)
/// and as a directory (`/etc/ssl/certs`). With a directory set, libcurl does not cache the store,
/// so every new TLS connection parsed the whole 200 KiB bundle again: about 24 ms of CPU each with
/// OpenSSL 3 (200 items from a server that closes each connection took 4.9 s of CPU; curl itself
/// pays the same). `update-ca-certificates` writes the same certificates into both, so the bundle
/// alone is the same trust; libcurl then keeps it parsed for the session, for `cacheSeconds`.
/// With `--ca-file` or `--ca-path` nothing changes (a small file, and a directory looked up one
/// hash at a time, cost little).
enum SystemTrust {
    /// How long libcurl keeps the parsed store before it reads the file again: a certificate
    /// the system adds or removes is seen within the hour, without a restart.
    static let cacheSeconds = 3600

    /// libcurl's built-in bundle, when it also has a built-in directory that would stop the
    /// cache and the bundle can be read; nil otherwise (then libcurl's defaults stay as they are).
    static let bundleInPlaceOfDirectory: String? = {
        guard let easy = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(easy) }
        func info(_ what: CURLINFO) -> String? {
            var p: UnsafeMutablePointer<CChar>? = nil
            guard spoolfetch_easy_getinfo_string(easy, what, &p) == CURLE_OK, let p else { return nil }
            return String(cString: p)
        }
        guard let bundle = info(CURLINFO_CAINFO), info(CURLINFO_CAPATH) != nil,
              access(bundle, R_OK) == 0 else { return nil }
        return bundle
    }()
}
