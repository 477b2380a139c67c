import Foundation

/// Which proxy libcurl uses for a URL, decided from the environment the way libcurl 7.88 does.
///
/// spoolfetch never sets CURLOPT_PROXY: libcurl takes the proxy from `http_proxy`,
/// `https_proxy`/`HTTPS_PROXY`, `all_proxy`/`ALL_PROXY` and skips it for hosts in
/// `no_proxy`/`NO_PROXY`. libcurl 7.88 cannot say afterwards whether it used one
/// (CURLINFO_USED_PROXY came in 8.7), so this type repeats its rules (url.c,
/// `create_conn_helper_init_proxy`, `detect_proxy`, noproxy.c) to name the proxy in error messages:
/// - `<scheme>_proxy` in lowercase; for schemes other than http also in uppercase (uppercase
///   `HTTP_PROXY` is ignored on purpose: CGI programs get it from a request header);
/// - else `all_proxy`, else `ALL_PROXY`; an empty value means no proxy;
/// - `no_proxy` (else `NO_PROXY`): `*` alone matches every host; otherwise a list separated by
///   commas or spaces of host names (a leading dot is ignored; a name matches itself and its
///   subdomains, case-insensitively) and IP addresses with an optional `/bits` CIDR suffix.
public struct ProxyEnvironment: Sendable, Hashable {
    private let variables: [String: String]

    public init(_ environment: [String: String] = ProcessInfo.processInfo.environment) {
        let names = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"]
        variables = environment.filter { names.contains($0.key) }
    }

    /// Whether no proxy variable is set: every connection goes to its own host.
    public var isEmpty: Bool { variables.isEmpty }

    /// The proxy libcurl uses for `url`, with any user name and password removed; nil for none.
    public func proxy(for url: String) -> String? {
        // Asked at the end of every transfer: without proxy variables, skip parsing the URL.
        if variables.isEmpty { return nil }
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(),
              var host = parts.host, !host.isEmpty else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if let noProxy = variables["no_proxy"] ?? variables["NO_PROXY"], Self.noProxy(noProxy, matches: host) {
            return nil
        }
        let lower = scheme + "_proxy"
        var value = variables[lower]
        if value == nil, lower != "http_proxy" { value = variables[lower.uppercased()] }
        if value == nil { value = variables["all_proxy"] ?? variables["ALL_PROXY"] }
        guard let proxy = value, !proxy.isEmpty else { return nil }
        return Self.withoutCredentials(proxy)
    }

    /// Whether a `no_proxy` list covers `host` (libcurl's `Curl_check_noproxy`).
    static func noProxy(_ list: String, matches host: String) -> Bool {
        let list = list.trimmingCharacters(in: .whitespaces)
        if list.isEmpty { return false }
        if list == "*" { return true }
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        let hostAddress = IPAddress(name)
        for rawToken in list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            var token = rawToken.lowercased()
            if let address = hostAddress {
                var bits: Int? = nil
                if let slash = token.firstIndex(of: "/") {
                    bits = Int(token[token.index(after: slash)...])
                    token = String(token[..<slash])
                }
                if let network = IPAddress(token), network.contains(address, prefixBits: bits) { return true }
                continue
            }
            if token.hasPrefix(".") { token.removeFirst() }
            if token.hasSuffix(".") { token.removeLast() }
            if token.isEmpty { continue }
            if token == name { return true }
            if name.count > token.count, name.hasSuffix("." + token) { return true }
        }
        return false
    }

    /// `http://user:secret@proxy:3128` → `http://proxy:3128`: a password never reaches a log.
    static func withoutCredentials(_ proxy: String) -> String {
        let afterScheme = proxy.range(of: "://").map { $0.upperBound } ?? proxy.startIndex
        let authorityEnd = proxy[afterScheme...].firstIndex(of: "/") ?? proxy.endIndex
        guard let at = proxy[afterScheme..<authorityEnd].lastIndex(of: "@") else { return proxy }
        return String(proxy[..<afterScheme]) + String(proxy[proxy.index(after: at)...])
    }
}

/// An IPv4 or IPv6 address as bytes, for `no_proxy` matching.
struct IPAddress: Hashable {
    let bytes: [UInt8]

    init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            return nil
        }
    }

    /// Whether `other` lies in this address's network of `prefixBits` bits (all bits when nil or
    /// out of range, as libcurl treats a bare address).
    func contains(_ other: IPAddress, prefixBits: Int?) -> Bool {
        guard bytes.count == other.bytes.count else { return false }
        let total = bytes.count * 8
        var bits = prefixBits ?? total
        if bits <= 0 || bits > total { bits = total }
        for i in 0..<bytes.count {
            let take = min(8, max(0, bits - i * 8))
            if take == 0 { break }
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if bytes[i] & mask != other.bytes[i] & mask { return false }
        }
        return true
    }
}
