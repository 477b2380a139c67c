import Foundation

/// A validated `http`/`https` URL. Strict on purpose: request files are hostile input.
public struct RequestURL: Sendable, Hashable, CustomStringConvertible {
    /// The URL as given, with scheme and host lowercased.
    public let string: String
    /// `http` or `https`.
    public let scheme: String
    /// Lowercased; an IPv6 literal without brackets.
    public let host: String
    /// Explicit, or 80/443.
    public let port: Int
    /// Raw path (`""` or `/…`), without query and fragment.
    public let path: String

    /// `host:port`, the unit of per-host connection limits.
    public var hostKey: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    public var description: String { string }

    /// Why a URL was refused.
    public struct Invalid: Error, Sendable, Equatable {
        public let reason: String
        /// `bad-scheme` or `bad-url`.
        public let rule: String
    }

    public static let maxLength = 8192

    public init(validating text: String) throws(Invalid) {
        guard !text.isEmpty else { throw Invalid(reason: "the URL is empty", rule: "bad-url") }
        guard text.utf8.count <= Self.maxLength else {
            throw Invalid(reason: "the URL is longer than \(Self.maxLength) bytes", rule: "bad-url")
        }
        for b in text.utf8 {
            if b <= 0x20 || b == 0x7F { throw Invalid(reason: "the URL contains a space or control character", rule: "bad-url") }
            if b >= 0x80 { throw Invalid(reason: "the URL contains non-ASCII characters; percent-encode them", rule: "bad-url") }
        }
        guard let schemeEnd = text.range(of: "://") else {
            throw Invalid(reason: "not an absolute URL (expected http:// or https://)", rule: "bad-url")
        }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else {
            throw Invalid(reason: "scheme '\(scheme.prefix(20))' is not allowed; only http and https", rule: "bad-scheme")
        }
        let rest = text[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        if authority.contains("@") {
            throw Invalid(reason: "credentials in the URL (user@host) are not allowed; put them in a header: line", rule: "bad-url")
        }
        var host: Substring
        var portText: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw Invalid(reason: "unterminated IPv6 address", rule: "bad-url") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw Invalid(reason: "malformed host", rule: "bad-url") }
                portText = after.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw Invalid(reason: "malformed IPv6 address", rule: "bad-url")
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { throw Invalid(reason: "the URL has no host", rule: "bad-url") }
        if !authority.hasPrefix("[") {
            let allowed = host.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_" || $0 == "%" }
            guard allowed else { throw Invalid(reason: "the host contains characters a host name cannot have", rule: "bad-url") }
        }
        var port = scheme == "https" ? 443 : 80
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isNumber), let p = Int(portText),
                  (1...65535).contains(p) else {
                throw Invalid(reason: "the port must be a number from 1 to 65535", rule: "bad-url")
            }
            port = p
        }
        let tail = rest[authorityEnd...]
        let pathEnd = tail.firstIndex { $0 == "?" || $0 == "#" } ?? tail.endIndex
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        self.path = String(tail[..<pathEnd])
        self.string = scheme + "://" + authority.lowercased() + tail
    }
}
