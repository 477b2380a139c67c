import Foundation

/// Whose fault a failed transfer is, which decides what it costs the item.
///
/// - `outage`: the server could not be *reached* — nothing of a response ever arrived. It says
///   nothing about this item, so it uses up no attempt: the host is held and probed until it
///   answers (or the item's resource timeout ends it).
/// - `server`: the server was reached and the failure came *from* it (a status code, a cut body,
///   a stall after bytes flowed, a bad certificate, a body that fails validation). It counts an
///   attempt, and `TransferFailure.isTransient` says whether to try again.
/// - `local`: this machine failed (writing the staging file, libcurl out of memory, a callback
///   abort); the engine handles these itself (for example waiting for disk space).
/// - `cancelled`: the engine removed the transfer.
/// - `policy`: this machine's egress policy refused the address (`--deny-network`): no packet
///   was sent, so nothing is known of the host — it is not held as down, and the item fails.
public enum TransferFailureKind: String, Sendable, Hashable {
    case outage, server, local, cancelled, policy
}

/// What the transfer saw of the connection, beside the failure itself: the evidence that tells
/// an outage from a failure of the server.
public struct ConnectionEvidence: Sendable, Hashable {
    /// Whether any byte of any response (status line, header or body, including a redirect's or a
    /// proxy's) arrived. Counted in the header and write callbacks.
    public var responseStarted: Bool
    /// libcurl's `CURLINFO_OS_ERRNO`: the errno of the last failed connect or TLS socket call
    /// (0 when none). Tells a TLS handshake the network broke from one the server refused.
    public var osErrno: Int32

    public init(responseStarted: Bool, osErrno: Int32 = 0) {
        self.responseStarted = responseStarted
        self.osErrno = osErrno
    }
}

extension TransferFailure {
    /// The failure's kind, given what the connection saw.
    ///
    /// libcurl codes (7.88) and their kind:
    ///
    /// | curl code | name                       | kind                                                     |
    /// |-----------|----------------------------|----------------------------------------------------------|
    /// | 5         | COULDNT_RESOLVE_PROXY      | outage                                                   |
    /// | 6         | COULDNT_RESOLVE_HOST       | outage                                                   |
    /// | 7         | COULDNT_CONNECT            | outage (refused, network/host unreachable, proxy down)   |
    /// | 28        | OPERATION_TIMEDOUT         | outage if no response byte (connect or TLS handshake     |
    /// |           |                            | timed out, server silent), else server (a stall)         |
    /// | 35        | SSL_CONNECT_ERROR          | outage if no response byte and the connection broke      |
    /// |           |                            | (errno ECONNRESET, EPIPE, ETIMEDOUT, ECONNREFUSED,        |
    /// |           |                            | ENETUNREACH, EHOSTUNREACH, ECONNABORTED, ENETDOWN,       |
    /// |           |                            | EHOSTDOWN, or OpenSSL's SSL_ERROR_SYSCALL: closed        |
    /// |           |                            | mid-handshake), else server (handshake refused: below)   |
    /// | 52        | GOT_NOTHING                | outage (closed before any response byte)                 |
    /// | 55        | SEND_ERROR                 | outage if no response byte, else server                  |
    /// | 56        | RECV_ERROR                 | outage if no response byte (reset), else server (cut)    |
    /// | 16, 92    | HTTP2, HTTP2_STREAM        | outage if no response byte, else server                  |
    /// | 95        | HTTP3                      | outage if no response byte, else server                  |
    /// | 97        | PROXY (SOCKS handshake)    | outage if no response byte, else server                  |
    /// | 18        | PARTIAL_FILE               | server (the body was cut)                                |
    /// | 1, 47, 63 | protocol, redirects, size  | server                                                   |
    /// | 58–60, 77, 83, 90, 91 | TLS verification | server                                                  |
    /// | 23, 27, 42, 43 | write, memory, abort, bad argument | local                                     |
    /// | any other |                            | server (counts an attempt: not known to be an outage)    |
    ///
    /// Other failures: `httpStatus`, `tooLarge`, `rangeMismatch`, `resourceChanged` and
    /// `proxyRefused` (the proxy answered: it was reached) are server; `write` is local; `cancelled` is cancelled;
    /// `addressDenied` is policy. A proxy that answers (even with an
    /// error) counts as a response: the proxy was reached, and what it says is treated like the
    /// server's answer.
    ///
    /// For 35, as seen with libcurl 7.88 + OpenSSL 3: a peer that closes mid-handshake gives
    /// "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to …" (errno 0), one that resets it
    /// "Recv failure: Connection reset by peer" (ECONNRESET). A handshake the server refused (an
    /// alert, no shared protocol version, plain HTTP on a TLS port) is SSL_ERROR_SSL with
    /// OpenSSL's reason and no socket errno: a server failure, as it will not heal by waiting.
    public func kind(given evidence: ConnectionEvidence) -> TransferFailureKind {
        switch self {
        case .cancelled: return .cancelled
        case .addressDenied: return .policy
        case .write, .uploadRead, .noRoom: return .local
        case .uploadChanged: return .server
        case .httpStatus, .tooLarge, .rangeMismatch, .resourceChanged, .proxyRefused, .clientCertificate, .redirectRefused:
            return .server
        case .curl(let code, let text):
            switch code {
            case 5, 6, 7, 52: return .outage
            case 28, 55, 56, 16, 92, 95, 97: return evidence.responseStarted ? .server : .outage
            case 35:
                let broken = Self.connectionErrnos.contains(evidence.osErrno) || text.contains("SSL_ERROR_SYSCALL")
                    || text.contains("Connection reset")
                return !evidence.responseStarted && broken ? .outage : .server
            case 23, 27, 42, 43: return .local
            default: return .server
            }
        }
    }

    /// errno values that mean the network or the peer's socket failed, not the peer's TLS stack.
    static let connectionErrnos: Set<Int32> = [ECONNRESET, EPIPE, ETIMEDOUT, ECONNREFUSED, ENETUNREACH,
                                              EHOSTUNREACH, ECONNABORTED, ENETDOWN, EHOSTDOWN]
}

extension TransferOutcome {
    /// The failure's kind (nil on success). See `TransferFailure.kind(given:)` for the table.
    public var failureKind: TransferFailureKind? { failure?.kind(given: evidence) }

    /// The server could not be reached: the engine holds the host and uses up no attempt.
    public var isOutage: Bool { failureKind == .outage }
}

extension TransferFailure {
    /// How a failure's text begins when the proxy, not the origin, could not be reached.
    public static let proxyUnreachablePrefix = "the proxy "

    /// The proxy named in a failure text that says the proxy could not be reached (see
    /// `Transfer.curlText`); nil for any other text.
    public static func unreachableProxy(in text: String) -> String? {
        guard let start = text.range(of: proxyUnreachablePrefix),
              let end = text.range(of: " could not be reached: ", range: start.upperBound..<text.endIndex) else { return nil }
        return String(text[start.upperBound..<end.lowerBound])
    }
}
