import Foundation

/// Which addresses the daemon may connect to (`--deny-network`, `--allow-network`): an address is
/// denied when a network of the deny list holds it and none of the allow list does (allow wins
/// where both match).
///
/// Pure on purpose: the transfer layer asks it about the resolved address of every connection it
/// is about to open (libcurl's open-socket callback), so a URL's spelling (`127.1`, `0x7f000001`,
/// a DNS name, a redirect, a rebinding answer) never reaches past it; the configuration asks it to
/// read the flags' text, so a bad network is refused at start.
///
/// Every address is held as 16 bytes: IPv4 as its IPv4-mapped IPv6 form (`::ffff:a.b.c.d`), an
/// IPv4 network `a.b.c.d/p` as `::ffff:a.b.c.d/(96+p)`. One comparison then covers both
/// families, and an IPv6 socket to `::ffff:169.254.169.254` (which the kernel sends to the IPv4
/// address) is caught by `169.254.0.0/16`.
public struct EgressPolicy: Sendable, Hashable, CustomStringConvertible {
    public var deny: [Network]
    public var allow: [Network]

    public init(deny: [Network], allow: [Network] = []) {
        self.deny = deny
        self.allow = allow
    }

    /// The built-in deny list: link-local (IPv4 and IPv6), the cloud metadata services that
    /// live outside it (AWS's IPv6 `fd00:ec2::254`, Alibaba's `100.100.100.200`), and
    /// 169.254.169.254 spelled in the well-known NAT64 prefix (`64:ff9b::a9fe:a9fe`), which a
    /// DNS64 resolver hands out and a NAT64 gateway turns back into the metadata address. Private
    /// and loopback ranges are not in it: intranet mirrors and local caches are a normal source.
    /// Comma and space separated, so that a manual can break the line between networks.
    public static let defaultDenyText =
        "169.254.0.0/16, fe80::/10, fd00:ec2::254/128, 100.100.100.200/32, 64:ff9b::a9fe:a9fe/128"
    public static let defaultDeny: [Network] = try! Network.list(parsing: defaultDenyText)

    /// The policy of the built-in lists.
    public static let standard = EgressPolicy(deny: defaultDeny)

    /// Reads `--deny-network` and `--allow-network` (comma- or space-separated networks; the word
    /// `default` in either stands for the built-in deny list).
    public init(denyText: String, allowText: String) throws(Network.Invalid) {
        self.init(deny: try Network.list(parsing: denyText), allow: try Network.list(parsing: allowText))
    }

    /// The deny network that refuses `address`; nil when the address may be used.
    public func denyingNetwork(for address: Address) -> Network? {
        guard let denied = deny.first(where: { $0.contains(address) }) else { return nil }
        return allow.contains(where: { $0.contains(address) }) ? nil : denied
    }

    public func allows(_ address: Address) -> Bool { denyingNetwork(for: address) == nil }

    /// Whether any address can be denied at all (an empty deny list checks nothing).
    public var checksAnything: Bool { !deny.isEmpty }

    public var description: String {
        "deny \(deny.map(\.description).joined(separator: ",")) allow \(allow.map(\.description).joined(separator: ","))"
    }
}

extension EgressPolicy {
    /// One IP address as 16 bytes (IPv4 mapped into IPv6, see `EgressPolicy`).
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        /// Network byte order.
        public let bytes: [UInt8]

        /// `bytes`: 4 (IPv4) or 16 (IPv6), in network byte order; nil for any other length.
        public init?(bytes: [UInt8]) {
            switch bytes.count {
            case 4: self.bytes = Self.mappedPrefix + bytes
            case 16: self.bytes = bytes
            default: return nil
            }
        }

        /// A numeric address in its strict form (`inet_pton`: dotted quad, or IPv6 text); nil
        /// for anything else. Lenient spellings (`127.1`, `0x7f000001`) are not addresses here:
        /// libcurl resolves those, and the policy sees the address they became.
        public init?(_ text: String) {
            if text.contains(":") {
                var raw = in6_addr()
                guard inet_pton(AF_INET6, text, &raw) == 1 else { return nil }
                self.init(bytes: withUnsafeBytes(of: &raw) { Array($0) })
            } else {
                var raw = in_addr()
                guard inet_pton(AF_INET, text, &raw) == 1 else { return nil }
                self.init(bytes: withUnsafeBytes(of: &raw) { Array($0) })
            }
        }

        static let mappedPrefix: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]

        /// An IPv4 address (or an IPv4-mapped IPv6 one).
        public var isIPv4: Bool { bytes.starts(with: Self.mappedPrefix) }

        /// IPv4 as a dotted quad (also for `::ffff:a.b.c.d`: what the kernel connects to), IPv6
        /// in its canonical text.
        public var description: String {
            if isIPv4 { return bytes[12...].map(String.init).joined(separator: ".") }
            var raw = in6_addr()
            withUnsafeMutableBytes(of: &raw) { $0.copyBytes(from: bytes) }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count)) != nil else { return "?" }
            return String(cString: text)
        }
    }

    /// A network in CIDR notation: an address and how many of its leading bits count.
    public struct Network: Sendable, Hashable, CustomStringConvertible {
        public let address: Address
        /// Leading bits of the 16-byte form that count (an IPv4 `/p` is `96 + p`).
        public let prefix: Int

        /// Why a network's text was refused; `description` names the text.
        public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
            public let text: String
            public let reason: String
            public var description: String { "'\(text)' is not a network: \(reason)" }
        }

        /// `a.b.c.d/p` (p 0–32), `x:y::z/p` (p 0–128), or a bare address (a single host). Host
        /// bits past the prefix are refused rather than silently cleared: `10.0.0.1/8` is a typo
        /// for `10.0.0.1/32` as often as for `10.0.0.0/8`.
        public init(parsing text: String) throws(Invalid) {
            let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            let addressText = String(parts[0])
            guard let address = Address(addressText) else {
                throw Invalid(text: text, reason: "'\(addressText)' is not an IPv4 address (a.b.c.d) or an IPv6 address")
            }
            let ipv4 = !addressText.contains(":")
            let width = ipv4 ? 32 : 128
            var bits = width
            if parts.count == 2 {
                guard !parts[1].isEmpty, parts[1].allSatisfy(\.isASCII), parts[1].allSatisfy(\.isNumber),
                      let n = Int(parts[1]), n <= width else {
                    throw Invalid(text: text, reason: "the prefix length after '/' must be 0 to \(width)")
                }
                bits = n
            }
            let prefix = ipv4 ? 96 + bits : bits
            let masked = Self.masked(address.bytes, prefix)
            guard masked == address.bytes else {
                let base = Address(bytes: masked).map(\.description) ?? "?"
                throw Invalid(text: text, reason: "it has bits set past its /\(bits) prefix (the network is \(base)/\(bits); a single host is \(addressText)/\(width))")
            }
            self.address = address
            self.prefix = prefix
        }

        public func contains(_ candidate: Address) -> Bool {
            Self.masked(candidate.bytes, prefix) == address.bytes
        }

        /// An IPv4 network as `a.b.c.d/p`; an IPv6 one as its canonical text.
        public var description: String {
            address.isIPv4 && prefix >= 96 ? "\(address)/\(prefix - 96)" : "\(address)/\(prefix)"
        }

        static func masked(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
            var out = bytes
            for i in 0..<16 {
                let keep = max(0, min(8, prefix - 8 * i))
                out[i] &= keep == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
            }
            return out
        }

        /// Networks separated by commas and/or white space; `default` stands for the built-in
        /// deny list. Empty text: no network.
        public static func list(parsing text: String) throws(Invalid) -> [Network] {
            var networks: [Network] = []
            for word in text.split(whereSeparator: { $0 == "," || $0.isWhitespace }) {
                if word == "default" {
                    networks += EgressPolicy.defaultDeny
                } else {
                    networks.append(try Network(parsing: String(word)))
                }
            }
            return networks
        }
    }
}
