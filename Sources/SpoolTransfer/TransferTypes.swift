import Crypto
import Foundation
import SpoolRequest

/// One download to run in the shared session.
///
/// The body is written straight into `destination` (an open staging file owned by the caller,
/// positioned by the session) while a running SHA-256 is fed, so nothing copies the body twice.
public struct TransferRequest: Sendable {
    public var url: String
    /// Extra request headers, `Name: value`.
    public var headers: [String]
    /// Open, writable file descriptor of the staging file. The caller keeps it open until the
    /// outcome arrives, and owns closing it.
    public var destination: Int32
    /// Bytes already in `destination` to resume after (0: start from zero).
    public var resumeFrom: Int64
    /// SHA-256 state of the first `resumeFrom` bytes, when resuming.
    public var prefixHash: HashState?
    /// Validator for `If-Range` (ETag preferred, else Last-Modified) when resuming.
    public var ifRange: String?
    /// A larger body is cut and the transfer fails with `.tooLarge`.
    public var maxBytes: Int64?
    /// A small body may be handed back unwritten, in `TransferOutcome.unwritten`, for the caller
    /// to write on another thread (see `ReceivedBody`).
    public var writeBehind: Bool
    /// A large body is made durable every this many bytes while it arrives (0: never), and
    /// `TransferSession.takeCheckpoints` reports how far (see `BodyWriter`, "Checkpoints"). The
    /// first `resumeFrom` bytes count as durable: the caller syncs them before it starts.
    public var syncEvery: Int64
    /// A cap shared with the other transfers of the same group (a request's `max-rate:`),
    /// besides the session's.
    public var rateGroup: RateGroup?
    /// Set for an upload: the body sent, read from its file; `destination` is then unused (the
    /// response body's first bytes come back in `TransferOutcome.responseBody`).
    public var upload: UploadSource?
    /// Segments at most (this transfer's connection included) when the body is large and the
    /// server answers ranges (see `SegmentSet`); 1: one stream.
    public var maxSegments = 1
    /// A segment that only checks bytes already written (see `SegmentSet.primaryWeak`): it
    /// hashes its range into a scratch file instead of leaving it unhashed.
    var verifying = false
    /// Ranges of a segmented body kept from before a restart or a stop, `[from, done, to]`
    /// each (`[from, done)` is in the file, durable: the caller syncs the part before it
    /// starts): the session fetches only what is missing.
    public var keptRanges: [[Int64]]?
    /// Where the asked range ends (exclusive): set, the request is a closed `Range: bytes=a-b`,
    /// so the server sends no byte past it (a segment, or a primary in front of kept ranges).
    var rangeEnd: Int64?
    /// A segment of a larger item (set by the session): its bytes are written at their offsets,
    /// not hashed, and only a 206 of the asked range under the item's validator is accepted.
    var segment = false
    /// Every request of the transfer signed with AWS SigV4 (a private S3 bucket; see `AWSSigV4Signing`).
    public var awsSigV4: AWSSigV4Signing?
    /// A TLS client certificate for the transfer's connections (see `TLSClientIdentity`); with
    /// one, redirects are followed on the URL's own origin only.
    public var clientIdentity: TLSClientIdentity?

    public init(url: String, headers: [String] = [], destination: Int32, resumeFrom: Int64 = 0,
                prefixHash: HashState? = nil, ifRange: String? = nil, maxBytes: Int64? = nil,
                writeBehind: Bool = false, syncEvery: Int64 = 0, rateGroup: RateGroup? = nil) {
        self.rateGroup = rateGroup
        self.writeBehind = writeBehind
        self.syncEvery = syncEvery
        self.url = url
        self.headers = headers
        self.destination = destination
        self.resumeFrom = resumeFrom
        self.prefixHash = prefixHash
        self.ifRange = ifRange
        self.maxBytes = maxBytes
    }
}

extension TransferRequest {
    /// The request for one range `[from, to)` of a segmented body, made from its primary's
    /// request — every field it has, so one added later reaches the segments too — asked under
    /// the body's `validator`, written at its offsets and not hashed. The size limit, write-behind,
    /// kept ranges, an upload's body and further splitting are the primary's alone.
    func segment(from: Int64, to: Int64, validator: String) -> TransferRequest {
        var request = self
        request.segment = true
        request.resumeFrom = from
        request.rangeEnd = to
        request.ifRange = validator
        request.prefixHash = nil
        request.maxBytes = nil
        request.writeBehind = false
        request.keptRanges = nil
        request.maxSegments = 1
        request.upload = nil
        return request
    }
}

/// Transfers that share one receive-rate cap: those with the same name, together.
public struct RateGroup: Sendable, Hashable {
    public var name: String
    /// Bytes per second for all of them together.
    public var bytesPerSecond: Int64

    public init(name: String, bytesPerSecond: Int64) {
        self.name = name
        self.bytesPerSecond = bytesPerSecond
    }
}

/// Session-wide settings.
public struct TransferConfiguration: Sendable {
    /// libcurl receive buffer. Larger than libcurl's 16 KiB default: fewer, larger write callbacks
    /// on large bodies.
    public var bufferSize: Int = 256 * 1024
    public var maxRedirects: Int = 20
    /// A transfer that receives no byte for this long is cut (and retried by the daemon).
    public var stallTimeout: Int = 60
    public var connectTimeout: Int = 30
    /// Extra trust, added to the system's CA store; verification itself is never turned off.
    public var caFile: String?
    public var caPath: String?
    /// A netrc file whose entries give user and password to the hosts they name (libcurl's
    /// rules: the matching host only, never another host after a redirect).
    public var netrcFile: String?
    public var userAgent: String = "spoolfetch/0.1"
    /// Bytes per second over all transfers of the session together (`--max-rate`); 0: no limit.
    /// Held by one token bucket in the write callbacks (see `RateGate`), so it holds across many
    /// short transfers and many concurrent ones; the engine then passes no per-transfer speed.
    public var maxRate: Int64 = 0
    /// Upper bound on simultaneous connections the multi handle may open (0: libcurl default).
    public var maxConnections: Int = 0
    /// Connections at once to one host (`--per-host`; 0: no bound). Holds HTTP/2 too when the
    /// server allows fewer streams than `maxStreams`: libcurl then opens more connections up to
    /// this bound, and further transfers wait inside libcurl for a stream.
    public var maxHostConnections: Int = 0
    /// Streams at once on one HTTP/2 connection (`--max-streams`); the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS bounds it further.
    public var maxStreams: Int = 100
    /// Which addresses a connection may go to (`--deny-network`, `--allow-network`), checked on
    /// the resolved address of every connection (see `EgressGuard`).
    public var egressPolicy = EgressPolicy.standard

    public init() {}
}

/// What the server said, as far as the item's marker and the resume logic care.
public struct ResponseFacts: Sendable, Hashable {
    /// Status of the final response (after redirects); 0 when none arrived.
    public var httpStatus: Int = 0
    /// The last URL libcurl used (CURLINFO_EFFECTIVE_URL, after redirects); set on failure too,
    /// so the `.error` record can say where a redirected item failed.
    public var finalURL: String?
    public var etag: String?
    public var lastModified: String?
    /// The response's `Date`: tells whether `lastModified` is a strong validator yet.
    public var date: String?
    public var contentType: String?
    /// Content-Length of the final response, if sent.
    public var contentLength: Int64?
    /// Total size from `Content-Range: bytes a-b/TOTAL` or `bytes */TOTAL`.
    public var rangeTotal: Int64?
    /// Start offset from `Content-Range: bytes a-b/…`.
    public var rangeStart: Int64?
    /// `Retry-After`, in seconds from now.
    public var retryAfter: Double?
    /// The response came over HTTP/2 or later: its connection carries other transfers as streams.
    public var multiplexed = false
    /// `Accept-Ranges: bytes`: the server answers ranges of this resource.
    public var acceptsRanges = false
    /// Connections the body came over: more than 1 when it was fetched in segments.
    public var connections = 1
    public var redirects: Int = 0
    /// `Location` of the final response (an upload's created resource).
    public var location: String?
    /// An error response's own reason, from its small XML or JSON body (S3's `<Code>` and
    /// `<Message>`: `SignatureDoesNotMatch: The request signature …`); nil when it has none.
    public var serverError: String?
    /// The rate-limit headers of the final response (`RateLimit`, `RateLimit-Policy`,
    /// `RateLimit-Remaining` & co.), by lowercased name, as sent: the scheduler reads them.
    public var rateLimitHeaders: [String: String] = [:]

    public init() {}
}

/// Why a transfer did not produce a complete body.
public enum TransferFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The final response had an error status (≥ 400, or an unexpected one).
    case httpStatus(Int)
    /// libcurl reported an error (connect, TLS, reset, timeout, protocol, redirects…). `text` is
    /// the code's generic text followed by libcurl's error buffer (what exactly failed: "Failed
    /// to connect to h port 80 after 3 ms: Connection refused", "SSL certificate problem: unable
    /// to get local issuer certificate") and, when one was in use, "(through proxy URL)".
    case curl(code: Int, text: String)
    /// Writing the staging file failed (`errno`); ENOSPC means the disk is full.
    case write(errno: Int32)
    /// The body exceeded `maxBytes`.
    case tooLarge(limit: Int64)
    /// The server answered a ranged request with a range other than the one asked for.
    case rangeMismatch(asked: Int64, got: Int64?)
    /// The server answered a resume's `If-Range: sent` with a range of another version (`got`,
    /// its validator): it ignored `If-Range`. The kept part is of the old version.
    case resourceChanged(sent: String, got: String)
    /// The transfer was removed by the engine (pause, cancel, shutdown).
    case cancelled
    /// An upload's file changed under it (shorter, longer, or rewritten): what was sent is not
    /// the file that was queued.
    case uploadChanged(String)
    /// Reading an upload's file failed (`errno`).
    case uploadRead(errno: Int32)
    /// The proxy answered the tunnel's `CONNECT` with an error status (403 forbidden by its
    /// rules, 407 credentials wanted, 5xx it could not reach the origin): the origin was never
    /// asked. `proxy` names it (credentials removed), `target` is the `host:port` asked for.
    case proxyRefused(status: Int, proxy: String, target: String)
    /// The egress policy refused the address a connection was about to use (`--deny-network`):
    /// `host` is the URL's host, or the proxy's URL when the connection was to a proxy
    /// (`throughProxy`); `address` and `port` what it resolved to; `network` the deny network that
    /// holds it; `url` the URL being fetched (after redirects), without its query. Nothing was sent.
    case addressDenied(host: String, address: String, port: Int, network: String, url: String, throughProxy: Bool)

    /// A client certificate was wanted, refused, or could not be loaded (what and why in the text).
    case clientCertificate(String)
    /// A transfer with a client certificate was redirected to another origin (`to`: scheme, host
    /// and port) and did not follow: the certificate is for its own server.
    case redirectRefused(to: String)
    /// The body has no room on a filesystem it goes to (see `BodyRoom`): cut at its headers
    /// when its size can `never` fit or does not fit now, or, of unknown length, when the
    /// staging filesystem's free space reached `min-free`. `reason` names the filesystem and
    /// its figures.
    case noRoom(never: Bool, reason: String)

    public var description: String {
        switch self {
        case .httpStatus(let s): return "HTTP status \(s)"
        case .curl(let code, let text): return "curl error \(code): \(text)"
        case .write(let e): return "writing the staging file failed: \(String(cString: strerror(e))) (errno \(e))"
        case .tooLarge(let limit): return "response larger than the limit of \(limit) bytes"
        case .rangeMismatch(let asked, let got):
            return "asked to resume at byte \(asked), server sent a range starting at \(got.map(String.init) ?? "?")"
        case .resourceChanged(let sent, let got) where sent == got:
            // `SegmentedTransfers+Weak.swift`: the first answer's bytes, fetched again, differed.
            return "the first answer came under a weak validator and its bytes differ from the same range under If-Range: \(sent): the resource changed; starting over from byte 0"
        case .resourceChanged(let sent, let got):
            return "resumed with If-Range: \(sent), but the server sent part of another version (\(got)): it ignored If-Range; starting over"
        case .cancelled: return "cancelled"
        case .uploadChanged(let what): return "the file to upload changed while it was sent: \(what)"
        case .uploadRead(let e): return "reading the file to upload failed: \(String(cString: strerror(e))) (errno \(e))"
        case .proxyRefused(let status, let proxy, let target):
            let what = status == 407 ? " (proxy authentication required: give the proxy's user and password in its URL, https_proxy=http://user:pass@host:port)"
                : status == 403 ? " (the proxy's rules forbid it)" : ""
            return "the proxy \(proxy) answered the CONNECT to \(target) with HTTP \(status)\(what); the origin was not asked"
        case .addressDenied(let host, let address, let port, let network, let url, let throughProxy):
            let whom = throughProxy ? "the proxy \(host)" : host
            let endpoint = address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
            return "connecting to \(whom) at \(endpoint) for \(url) is denied by the egress policy (\(network) is in --deny-network and not in --allow-network); nothing was sent"

        case .clientCertificate(let text): return text
        case .redirectRefused(let to):
            return "the server redirected to \(to), another host: an item with a client certificate follows redirects on its own host only"
        case .noRoom(_, let reason): return reason
        }
    }

    /// A stable reason code for markers and error files.
    public var code: String {
        switch self {
        case .httpStatus: return "http-status"
        case .curl(let code, _):
            switch code {
            case 6: return "dns"
            case 7: return "connect"
            case 28: return "timeout"
            case 47: return "too-many-redirects"
            case 1: return "unsupported-protocol"
            case 60, 35, 58, 59, 77, 83, 90, 91: return "tls"
            case 63: return "too-large"
            default: return "transfer"
            }
        case .write(let e): return e == ENOSPC || e == EDQUOT ? "disk-full" : "write"
        case .tooLarge: return "too-large"
        case .rangeMismatch: return "range-mismatch"
        case .resourceChanged: return "resource-changed"
        case .cancelled: return "cancelled"
        case .uploadChanged: return "upload-changed"
        case .uploadRead: return "upload-unreadable"
        case .proxyRefused: return "proxy"
        case .addressDenied: return "address-denied"

        case .clientCertificate: return "client-certificate"
        case .redirectRefused: return "redirect-refused"
        case .noRoom: return "disk-full"
        }
    }

    /// Whether the kept part must go: the server would not (or could not) continue it.
    public var discardsPartial: Bool {
        switch self {
        case .rangeMismatch, .resourceChanged: return true
        default: return false
        }
    }

    /// Whether trying again later may succeed: connect errors, resets, timeouts, 408, 429, 5xx.
    /// Permanent: other 4xx, TLS verification, too many redirects, forbidden protocols, size limits.
    public var isTransient: Bool {
        switch self {
        case .httpStatus(let s): return s == 408 || s == 429 || (500...599).contains(s)
        case .curl(let code, _):
            // 5 proxy, 6 dns, 7 connect, 18 partial file, 28 timeout, 52 empty reply, 55 send,
            // 56 recv, 16 http2, 92 http2 stream, 92, 95 http3
            return [5, 6, 7, 16, 18, 28, 52, 55, 56, 92, 95].contains(code)
        case .write(let e): return e == ENOSPC || e == EDQUOT || e == EINTR || e == EAGAIN
        case .noRoom(let never, _): return !never
        case .tooLarge, .uploadChanged, .uploadRead, .clientCertificate, .redirectRefused: return false
        // A refusal by the proxy's rules or for its credentials is the same on every try; a 5xx
        // (it could not reach the origin, it is overloaded) may pass.
        case .proxyRefused(let status, _, _): return status == 408 || status == 429 || (500...599).contains(status)
        case .rangeMismatch, .resourceChanged: return true
        // The same address is denied on every try, for as long as the policy stands.
        case .addressDenied: return false
        case .cancelled: return false
        }
    }
}

/// The end of one transfer, reported by `TransferSession.perform()`.
public struct TransferOutcome: Sendable {
    public var key: Int
    /// nil on success: the whole body is in the destination file.
    public var failure: TransferFailure?
    public var facts: ResponseFacts
    /// Size of the destination file's content now (resumed prefix + bytes written), counting
    /// `unwritten` as written.
    public var bytesOnDisk: Int64
    /// Bytes received over the network in this attempt.
    public var bytesReceived: Int64
    /// Hex SHA-256 of the first `bytesOnDisk` bytes; nil if the transfer failed.
    public var sha256: String?
    /// Running hash of the content so far (to resume from after a cut connection).
    public var hashState: HashState
    /// True when the server ignored or refused the range and the body restarted at byte 0.
    public var restartedFromZero: Bool
    /// The proxy libcurl went through for the last URL (from `http_proxy` & co.; credentials
    /// removed); nil when it connected directly. See `ProxyEnvironment`.
    public var proxy: String?
    /// What the connection saw: whether a response began, the socket's errno. Decides
    /// `failureKind` (outage or failure from the server).
    public var evidence: ConnectionEvidence
    /// The destination holds bytes past `bytesOnDisk` (ranges of a segmented transfer that
    /// stopped): the caller cuts it back before anything builds on it.
    public var partHasMore = false
    /// A segmented transfer that stopped without breaking a promise (a failure to retry, a
    /// pause, a stop): its ranges past `bytesOnDisk`, `[from, done, to]` each, as far as they are
    /// in the destination (written, not necessarily synced). The caller keeps them instead of
    /// cutting the part back, and the next start fetches only what is missing of them.
    public var keptRanges: [[Int64]]? = nil
    /// Body bytes the server sent past the ranges asked of it (a range cut where another
    /// connection took over its tail, the primary cut at its range's end): received and dropped.
    public var overshootBytes: Int64 = 0
    /// On success only: body bytes not yet in the destination file, which the caller must write
    /// at `unwritten.offset` before anything reads, syncs or names the file (see `ReceivedBody`).
    public var unwritten: ReceivedBody?
    /// An upload's response body, its first `UploadSource.responseLimit` bytes (nil: none, or
    /// not an upload).
    public var responseBody: [UInt8]? = nil
}

/// The running SHA-256 of a body, carried between attempts so a resumed file's digest covers
/// the whole file. `SHA256` is a plain value type without a `Sendable` annotation; copies are
/// independent, so sending one across threads is safe.
public struct HashState: @unchecked Sendable {
    public var sha: SHA256
    public init(_ sha: SHA256 = SHA256()) { self.sha = sha }
    public mutating func update(_ bytes: UnsafeRawBufferPointer) { sha.update(bufferPointer: bytes) }
    /// Hex digest of what was fed so far (the state itself is left as it is).
    public var hexDigest: String { Hex.encode(sha.finalize()) }
}

/// Lowercase hex without `String(format:)`, which is slow enough to show in profiles.
enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)
    static func encode<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
