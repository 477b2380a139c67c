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
    public var hostKey: String { host.utf8.contains(0x3A) ? "[\(host)]:\(port)" : "\(host):\(port)" }
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
        var text = text
        // Once every byte is printable ASCII, bytes are characters: the checks below work on
        // bytes (a list of 100,000 URLs is validated in a fraction of a second).
        let result = text.withUTF8 { b in Result { () throws(Invalid) -> RequestURL in try RequestURL(ascii: b) } }
        self = try result.get()
    }

    /// The text after the first blank of a URL line's value (`http://h/x some words` gives
    /// `some words`), cut to 40 characters; nil when there is none. For the parser's message: a
    /// request file's URL line holds the URL alone.
    public static func trailingText(of text: String) -> String? {
        let b = Array(text.utf8)
        guard let blank = b.firstIndex(where: { $0 == 0x20 || $0 == 0x09 }) else { return nil }
        let rest = b[(blank + 1)...].drop { $0 == 0x20 || $0 == 0x09 }
        guard let first = rest.first, first > 0x20, first != 0x7F else { return nil }
        let shown = String(decoding: rest.prefix(40), as: UTF8.self)
        return rest.count > 40 ? shown + "…" : shown
    }

    private init(ascii b: UnsafeBufferPointer<UInt8>) throws(Invalid) {
        for c in b {
            if c <= 0x20 || c == 0x7F { throw Invalid(reason: "the URL contains a space or control character", rule: "bad-url") }
            if c >= 0x80 { throw Invalid(reason: "the URL contains non-ASCII characters; percent-encode them", rule: "bad-url") }
        }
        func string(_ r: Range<Int>) -> String { String(decoding: UnsafeBufferPointer(rebasing: b[r]), as: UTF8.self) }
        func lower(_ r: Range<Int>) -> String {
            String(decoding: b[r].map { ($0 >= 0x41 && $0 <= 0x5A) ? $0 | 0x20 : $0 }, as: UTF8.self)
        }
        func first(in r: Range<Int>, where match: (UInt8) -> Bool) -> Int? {
            var i = r.lowerBound
            while i < r.upperBound { if match(b[i]) { return i }; i += 1 }
            return nil
        }
        var schemeEnd = -1
        var i = 0
        while i + 2 < b.count { if b[i] == 0x3A && b[i + 1] == 0x2F && b[i + 2] == 0x2F { schemeEnd = i; break }; i += 1 }
        guard schemeEnd >= 0 else {
            throw Invalid(reason: "not an absolute URL (expected http:// or https://)", rule: "bad-url")
        }
        let scheme = lower(0..<schemeEnd)
        guard scheme == "http" || scheme == "https" else {
            throw Invalid(reason: "scheme '\(scheme.prefix(20))' is not allowed; only http and https", rule: "bad-scheme")
        }
        let restStart = schemeEnd + 3
        let authorityEnd = first(in: restStart..<b.count) { $0 == 0x2F || $0 == 0x3F || $0 == 0x23 } ?? b.count
        let authority = restStart..<authorityEnd
        if first(in: authority, where: { $0 == 0x40 }) != nil {
            throw Invalid(reason: "credentials in the URL (user@host) are not allowed; put them in a header: line", rule: "bad-url")
        }
        func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
        func isLetter(_ c: UInt8) -> Bool { let l = c | 0x20; return l >= 0x61 && l <= 0x7A }
        let bracketed = !authority.isEmpty && b[authority.lowerBound] == 0x5B
        var host: Range<Int>
        var port: Range<Int>? = nil
        if bracketed {
            guard let close = first(in: authority, where: { $0 == 0x5D }) else {
                throw Invalid(reason: "unterminated IPv6 address", rule: "bad-url")
            }
            host = (authority.lowerBound + 1)..<close
            let after = (close + 1)..<authority.upperBound
            if !after.isEmpty {
                guard b[after.lowerBound] == 0x3A else { throw Invalid(reason: "malformed host", rule: "bad-url") }
                port = (after.lowerBound + 1)..<after.upperBound
            }
            guard !host.isEmpty, b[host].allSatisfy({ isDigit($0) || (($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x66) || $0 == 0x3A || $0 == 0x2E }) else {
                throw Invalid(reason: "malformed IPv6 address", rule: "bad-url")
            }
        } else if let colon = authority.reversed().first(where: { b[$0] == 0x3A }) {
            host = authority.lowerBound..<colon
            port = (colon + 1)..<authority.upperBound
        } else {
            host = authority
        }
        guard !host.isEmpty else { throw Invalid(reason: "the URL has no host", rule: "bad-url") }
        if !bracketed {
            let allowed = b[host].allSatisfy { isLetter($0) || isDigit($0) || $0 == 0x2D || $0 == 0x2E || $0 == 0x5F || $0 == 0x25 }
            guard allowed else { throw Invalid(reason: "the host contains characters a host name cannot have", rule: "bad-url") }
        }
        var portNumber = scheme == "https" ? 443 : 80
        if let port {
            guard !port.isEmpty, port.count <= 5, b[port].allSatisfy(isDigit) else {
                throw Invalid(reason: "the port must be a number from 1 to 65535", rule: "bad-url")
            }
            let p = b[port].reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard (1...65535).contains(p) else { throw Invalid(reason: "the port must be a number from 1 to 65535", rule: "bad-url") }
            portNumber = p
        }
        let pathEnd = first(in: authorityEnd..<b.count) { $0 == 0x3F || $0 == 0x23 } ?? b.count
        self.scheme = scheme
        self.host = lower(host)
        self.port = portNumber
        self.path = string(authorityEnd..<pathEnd)
        // The whole URL in one buffer, its scheme and authority in lower case: three String
        // appends cost more than the checks above together, and every item's URL is parsed
        // at intake and again at its start.
        self.string = String(unsafeUninitializedCapacity: b.count) { out in
            for i in 0..<b.count {
                let c = b[i]
                out[i] = i < authorityEnd && c >= 0x41 && c <= 0x5A ? c | 0x20 : c
            }
            return b.count
        }
    }
}
