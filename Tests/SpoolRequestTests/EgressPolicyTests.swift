import SpoolRequest
import XCTest

/// `--deny-network` / `--allow-network`: reading networks, and which addresses they hold.
final class EgressPolicyTests: XCTestCase {
    private func address(_ text: String) throws -> EgressPolicy.Address {
        try XCTUnwrap(EgressPolicy.Address(text), text)
    }

    private func network(_ text: String) throws -> EgressPolicy.Network {
        try EgressPolicy.Network(parsing: text)
    }

    func testIPv4NetworksHoldTheirAddressesOnly() throws {
        let net = try network("10.1.0.0/16")
        XCTAssertTrue(net.contains(try address("10.1.0.0")))
        XCTAssertTrue(net.contains(try address("10.1.255.255")))
        XCTAssertFalse(net.contains(try address("10.2.0.0")))
        XCTAssertFalse(net.contains(try address("10.0.255.255")))
        let odd = try network("192.168.4.0/22")
        XCTAssertTrue(odd.contains(try address("192.168.7.1")))
        XCTAssertFalse(odd.contains(try address("192.168.8.1")))
        XCTAssertEqual(net.description, "10.1.0.0/16")
    }

    func testEdgePrefixes() throws {
        let all4 = try network("0.0.0.0/0")
        XCTAssertTrue(all4.contains(try address("1.2.3.4")))
        XCTAssertTrue(all4.contains(try address("255.255.255.255")))
        XCTAssertTrue(all4.contains(try address("::ffff:8.8.8.8")), "a mapped address is its IPv4 address")
        XCTAssertFalse(all4.contains(try address("2001:db8::1")), "0.0.0.0/0 is IPv4 only")
        let all6 = try network("::/0")
        XCTAssertTrue(all6.contains(try address("2001:db8::1")))
        XCTAssertTrue(all6.contains(try address("1.2.3.4")), "::/0 holds the IPv4-mapped range too")
        let host4 = try network("127.0.0.2/32")
        XCTAssertTrue(host4.contains(try address("127.0.0.2")))
        XCTAssertFalse(host4.contains(try address("127.0.0.3")))
        XCTAssertFalse(host4.contains(try address("127.0.0.1")))
        let bare = try network("127.0.0.2")
        XCTAssertEqual(bare, host4, "a bare address is a single host")
        let host6 = try network("fd00:ec2::254/128")
        XCTAssertTrue(host6.contains(try address("fd00:ec2:0::254")))
        XCTAssertFalse(host6.contains(try address("fd00:ec2::255")))
        XCTAssertEqual(try network("fd00:ec2::254"), host6)
    }

    func testIPv6NetworksAndTheirBitBoundaries() throws {
        let linkLocal = try network("fe80::/10")
        XCTAssertTrue(linkLocal.contains(try address("fe80::1")))
        XCTAssertTrue(linkLocal.contains(try address("febf:ffff::1")))
        XCTAssertFalse(linkLocal.contains(try address("fec0::1")))
        XCTAssertFalse(linkLocal.contains(try address("fe7f::1")))
        XCTAssertFalse(linkLocal.contains(try address("169.254.1.1")))
        XCTAssertEqual(linkLocal.description, "fe80::/10")
    }

    func testIPv4MappedAddressesAreCaughtByIPv4Networks() throws {
        let policy = EgressPolicy.standard
        XCTAssertNotNil(policy.denyingNetwork(for: try address("::ffff:169.254.169.254")))
        XCTAssertNotNil(policy.denyingNetwork(for: try address("::ffff:a9fe:a9fe")))
        XCTAssertEqual(try address("::ffff:169.254.169.254").description, "169.254.169.254")
        // And a mapped network is an IPv4 network.
        let mapped = try network("::ffff:127.0.0.0/104")
        XCTAssertEqual(mapped, try network("127.0.0.0/8"))
        XCTAssertEqual(mapped.description, "127.0.0.0/8")
    }

    func testTheDefaultDeniesLinkLocalAndMetadataAndNothingElse() throws {
        let policy = EgressPolicy.standard
        for denied in ["169.254.169.254", "169.254.0.1", "fe80::1", "fd00:ec2::254", "100.100.100.200",
                       "64:ff9b::a9fe:a9fe", "64:ff9b::169.254.169.254"] {
            XCTAssertNotNil(policy.denyingNetwork(for: try address(denied)), denied)
        }
        for allowed in ["127.0.0.1", "::1", "10.0.0.5", "192.168.1.1", "172.16.0.1", "100.100.100.201",
                        "fd00:ec2::253", "8.8.8.8", "2001:db8::1", "169.253.255.255", "169.255.0.0",
                        "64:ff9b::a9fe:a9ff", "64:ff9b::808:808"] {
            XCTAssertNil(policy.denyingNetwork(for: try address(allowed)), allowed)
        }
        XCTAssertEqual(EgressPolicy.defaultDeny.map(\.description),
                       ["169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32", "64:ff9b::a9fe:a9fe/128"])
    }

    func testAllowWinsWhereBothMatch() throws {
        let policy = try EgressPolicy(denyText: "127.0.0.0/8", allowText: "127.0.0.2/32")
        XCTAssertTrue(policy.allows(try address("127.0.0.2")))
        XCTAssertFalse(policy.allows(try address("127.0.0.1")))
        XCTAssertEqual(policy.denyingNetwork(for: try address("127.0.0.3"))?.description, "127.0.0.0/8")
        XCTAssertTrue(policy.allows(try address("10.0.0.1")), "allowed when no deny network holds it")
        // An allow alone changes nothing: everything not denied is allowed already.
        let onlyAllow = try EgressPolicy(denyText: "", allowText: "10.0.0.0/8")
        XCTAssertTrue(onlyAllow.allows(try address("169.254.169.254")))
        XCTAssertFalse(onlyAllow.checksAnything)
    }

    func testTheWordDefaultAndListSeparators() throws {
        let policy = try EgressPolicy(denyText: "default, 10.0.0.0/8 192.168.0.0/16", allowText: "")
        XCTAssertEqual(policy.deny.count, EgressPolicy.defaultDeny.count + 2)
        XCTAssertFalse(policy.allows(try address("169.254.169.254")))
        XCTAssertFalse(policy.allows(try address("10.9.9.9")))
        XCTAssertFalse(policy.allows(try address("192.168.3.3")))
        XCTAssertTrue(try EgressPolicy(denyText: "", allowText: "").deny.isEmpty)
    }

    func testBadInputIsRefusedNamingTheText() {
        let bad: [(String, String)] = [
            ("10.0.0.0/33", "prefix length"),
            ("::/129", "prefix length"),
            ("10.0.0.0/", "prefix length"),
            ("10.0.0.0/-1", "prefix length"),
            ("10.0.0.0/8/8", "prefix length"),
            ("10.0.0.0/ 8", "prefix length"),
            ("10.0.0.1/8", "bits set past its /8 prefix (the network is 10.0.0.0/8"),
            ("fe80::1/10", "bits set past its /10 prefix (the network is fe80::/10"),
            ("127.1", "not an IPv4 address"),
            ("0x7f000001", "not an IPv4 address"),
            ("256.0.0.0/8", "not an IPv4 address"),
            ("example.com/24", "not an IPv4 address"),
            ("/8", "not an IPv4 address"),
            ("1.2.3.4.5", "not an IPv4 address"),
            ("fe80::/１０", "prefix length"),
        ]
        for (text, reason) in bad {
            XCTAssertThrowsError(try EgressPolicy.Network(parsing: text), text) { error in
                let message = "\(error)"
                XCTAssertTrue(message.hasPrefix("'\(text)' is not a network: "), message)
                XCTAssertTrue(message.contains(reason), message)
            }
        }
        XCTAssertThrowsError(try EgressPolicy(denyText: "10.0.0.0/8, nonsense", allowText: "")) { error in
            XCTAssertTrue("\(error)".hasPrefix("'nonsense' is not a network"), "\(error)")
        }
    }

    func testAddressesFromSocketBytes() throws {
        let v4 = try XCTUnwrap(EgressPolicy.Address(bytes: [169, 254, 169, 254]))
        XCTAssertEqual(v4, try address("169.254.169.254"))
        XCTAssertEqual(v4.description, "169.254.169.254")
        XCTAssertNil(EgressPolicy.Address(bytes: [1, 2, 3]))
        let v6 = try XCTUnwrap(EgressPolicy.Address(bytes: [0xfe, 0x80] + Array(repeating: 0, count: 13) + [1]))
        XCTAssertEqual(v6.description, "fe80::1")
        XCTAssertFalse(v6.isIPv4)
    }
}
