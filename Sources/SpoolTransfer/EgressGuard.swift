internal import CCurl
import Foundation
import SpoolRequest

/// The egress policy (`--deny-network`, `--allow-network`) at the one place no spelling of a URL
/// gets past: libcurl's open-socket callback, which sees the resolved address of every connection
/// it is about to open — after a redirect, for each A/AAAA record it tries, whatever the DNS
/// answered this time, whatever numeric form (`127.1`, `0x7f000001`) the URL used. Through a proxy
/// libcurl connects only to the proxy, so the proxy's address is the one checked.
///
/// One per transfer (its context pointer, `CURLOPT_OPENSOCKETDATA`); it remembers the connection
/// it refused so that the transfer's failure can name it.
final class EgressGuard {
    let policy: EgressPolicy
    /// The last connection refused: its address, port and the deny network that holds it.
    private(set) var refused: (address: EgressPolicy.Address, port: Int, network: EgressPolicy.Network)?
    /// Whether the last socket asked for was refused (a later allowed one — the next A/AAAA
    /// record — clears it): a connect failure is then the policy's, not the network's.
    private(set) var lastRefused = false

    init(policy: EgressPolicy) { self.policy = policy }

    /// Whether a connection to `address` may be opened; records it when not.
    func admits(_ address: UnsafePointer<curl_sockaddr>) -> Bool {
        guard let (ip, port) = Self.endpoint(address) else {
            // Not an IP socket (libcurl opens only these unless told to use a Unix socket, which
            // spoolfetch never does): nothing for an IP policy to judge.
            lastRefused = false
            return true
        }
        if let network = policy.denyingNetwork(for: ip) {
            refused = (ip, port, network)
            lastRefused = true
            return false
        }
        lastRefused = false
        return true
    }

    /// The IP address and port of a socket address libcurl is about to connect to; nil for a
    /// family other than IPv4 and IPv6.
    static func endpoint(_ address: UnsafePointer<curl_sockaddr>) -> (EgressPolicy.Address, Int)? {
        let family = address.pointee.family
        let length = Int(address.pointee.addrlen)
        // `addr` is declared a 16-byte `struct sockaddr`, but libcurl's storage behind it is as
        // large as `addrlen` (an IPv6 address needs 28): read it in place, never through a copy.
        guard let offset = MemoryLayout<curl_sockaddr>.offset(of: \.addr) else { return nil }
        let bytes = UnsafeRawPointer(address).advanced(by: offset)
        switch family {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size:
            let sin = bytes.loadUnaligned(as: sockaddr_in.self)
            let ip = withUnsafeBytes(of: sin.sin_addr) { Array($0) }
            return EgressPolicy.Address(bytes: ip).map { ($0, Int(UInt16(bigEndian: sin.sin_port))) }
        case AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            let sin6 = bytes.loadUnaligned(as: sockaddr_in6.self)
            let ip = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
            return EgressPolicy.Address(bytes: ip).map { ($0, Int(UInt16(bigEndian: sin6.sin6_port))) }
        default:
            return nil
        }
    }
}

extension TransferCallbacks {
    /// CURLOPT_OPENSOCKETFUNCTION: a denied address gets no socket (libcurl tries its next
    /// address, and fails with CURLE_COULDNT_CONNECT when none is left); any other gets the socket
    /// libcurl would have made itself, close-on-exec so that a hook's process never inherits it.
    static let openSocket: spoolfetch_opensocket_callback = { context, _, address in
        guard let context, let address else { return spoolfetch_socket_bad() }
        let check = Unmanaged<EgressGuard>.fromOpaque(context).takeUnretainedValue()
        guard check.admits(address) else { return spoolfetch_socket_bad() }
        return socket(address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue),
                      address.pointee.protocol)
    }
}

extension TransferSession {
    /// Installs the egress check on a transfer's handle (nothing when the deny list is empty).
    func configureEgress(_ easy: EasyHandle, for transfer: Transfer) throws(TransferSetupError) {
        guard configuration.egressPolicy.checksAnything else { return }
        let check = EgressGuard(policy: configuration.egressPolicy)
        transfer.egress = check
        try easy.setOpenSocket(TransferCallbacks.openSocket)
        try easy.set(.openSocketData, Unmanaged.passUnretained(check).toOpaque())
    }
}

extension Transfer {
    /// The failure to report when libcurl could not connect because the policy refused the
    /// address it was about to use; nil for any other failure.
    func egressFailure(_ code: CURLcode) -> TransferFailure? {
        guard code == CURLE_COULDNT_CONNECT, let egress, egress.lastRefused, let refused = egress.refused else { return nil }
        // After a redirect libcurl's effective URL is the one it was connecting for.
        let url = easy.string(CURLINFO_EFFECTIVE_URL) ?? request.url
        let proxy = proxies.proxy(for: url)
        let host = proxy ?? URLComponents(string: url)?.host ?? url
        return .addressDenied(host: host, address: "\(refused.address)", port: refused.port,
                              network: "\(refused.network)", url: Self.withoutQuery(url), throughProxy: proxy != nil)
    }

    /// A URL without its query and fragment (a signed URL's query is a credential).
    static func withoutQuery(_ url: String) -> String {
        guard let cut = url.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return url }
        return String(url[..<cut])
    }
}
