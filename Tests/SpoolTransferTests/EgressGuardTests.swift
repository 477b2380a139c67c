import Foundation
import SpoolRequest
import SpoolTestSupport
import SpoolTransfer
import XCTest

/// The egress policy in the libcurl session: a denied address gets no socket (the server counts no
/// connection), the failure names it and is of kind `policy`; IPv6 addresses are read whole, an
/// IPv4-mapped one is judged as its IPv4 address, and a name with several addresses connects to
/// the one allowed.
final class EgressGuardTests: XCTestCase {
    private func driver(deny: String, allow: String = "") throws -> SessionDriver {
        var configuration = TransferConfiguration()
        configuration.egressPolicy = try EgressPolicy(denyText: deny, allowText: allow)
        return try SessionDriver(configuration: configuration)
    }

    func testADeniedAddressGetsNoSocketAndFailsAsPolicyNotOutage() throws {
        let server = try TestHTTPServer.start()
        defer { try? server.shutdown() }
        server.serve("/x", body: Array("x".utf8))
        let outcome = try driver(deny: "127.0.0.0/8").fetch(server.url("/x?token=s3cr3t"))
        guard case .addressDenied(let host, let address, let port, let network, let url, let proxied)? = outcome.failure else {
            return XCTFail("\(String(describing: outcome.failure))")
        }
        XCTAssertEqual([host, address, network, url], ["127.0.0.1", "127.0.0.1", "127.0.0.0/8", server.url("/x")])
        XCTAssertEqual(port, server.port)
        XCTAssertFalse(proxied)
        XCTAssertEqual(outcome.failureKind, .policy)
        XCTAssertFalse(outcome.isOutage)
        XCTAssertEqual(outcome.failure?.code, "address-denied")
        XCTAssertEqual(outcome.failure?.isTransient, false)
        XCTAssertFalse("\(outcome.failure!)".contains("s3cr3t"), "\(outcome.failure!)")
        XCTAssertEqual(server.connectionCount, 0, "no socket was opened")
        // The same fetch with the default policy goes through.
        XCTAssertNil(try SessionDriver().fetch(server.url("/x")).failure)
        XCTAssertEqual(server.connectionCount, 1)
    }

    func testIPv6AndIPv4MappedAddresses() throws {
        let six = try TestHTTPServer.start(host: "::1")
        defer { try? six.shutdown() }
        six.serve("/x", body: Array("six".utf8))
        let denied = try driver(deny: "::1/128").fetch("http://[::1]:\(six.port)/x")
        guard case .addressDenied(_, let address, let port, let network, _, _)? = denied.failure else {
            return XCTFail("\(String(describing: denied.failure))")
        }
        XCTAssertEqual([address, network], ["::1", "::1/128"])
        XCTAssertEqual(port, six.port)
        XCTAssertTrue("\(denied.failure!)".contains("at [::1]:\(six.port) "), "\(denied.failure!)")
        XCTAssertEqual(six.connectionCount, 0)

        // An IPv6 socket to ::ffff:127.0.0.1 reaches 127.0.0.1: 127.0.0.0/8 holds it.
        let four = try TestHTTPServer.start()
        defer { try? four.shutdown() }
        four.serve("/x", body: Array("four".utf8))
        let mappedURL = "http://[::ffff:127.0.0.1]:\(four.port)/x"
        XCTAssertNil(try SessionDriver().fetch(mappedURL).failure, "the mapped address does reach the IPv4 server")
        XCTAssertEqual(four.connectionCount, 1)
        let mapped = try driver(deny: "127.0.0.0/8").fetch(mappedURL)
        guard case .addressDenied(_, let mappedAddress, _, _, _, _)? = mapped.failure else {
            return XCTFail("\(String(describing: mapped.failure))")
        }
        XCTAssertEqual(mappedAddress, "127.0.0.1")
        XCTAssertEqual(four.connectionCount, 1, "no second connection")
    }

    func testANameWithSeveralAddressesConnectsToTheAllowedOne() throws {
        // libcurl resolves `localhost` to ::1 and 127.0.0.1 itself; each is checked as it is tried.
        let four = try TestHTTPServer.start()
        defer { try? four.shutdown() }
        four.serve("/x", body: Array("four".utf8))
        let outcome = try driver(deny: "::1/128").fetch("http://localhost:\(four.port)/x")
        XCTAssertNil(outcome.failure, "\(String(describing: outcome.failure))")
        XCTAssertEqual(four.requests(for: "/x").count, 1)
        // And the other way round (whichever family libcurl tries first, one of the two runs
        // starts with a refused address and goes on to the allowed one).
        let six = try TestHTTPServer.start(port: four.port, host: "::1")
        defer { try? six.shutdown() }
        six.serve("/x", body: Array("six".utf8))
        let other = try driver(deny: "127.0.0.0/8").fetch("http://localhost:\(four.port)/x")
        XCTAssertNil(other.failure, "\(String(describing: other.failure))")
        XCTAssertEqual(six.requests(for: "/x").count, 1)
        XCTAssertEqual(four.requests(for: "/x").count, 1)
        let both = try driver(deny: "::1/128, 127.0.0.0/8").fetch("http://localhost:\(four.port)/x")
        guard case .addressDenied(let host, _, _, _, _, _)? = both.failure else {
            return XCTFail("\(String(describing: both.failure))")
        }
        XCTAssertEqual(host, "localhost")
        XCTAssertEqual(four.requests(for: "/x").count, 1)
    }
}
