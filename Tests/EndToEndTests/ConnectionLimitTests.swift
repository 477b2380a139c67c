import Foundation
import SpoolTestSupport
import XCTest

/// Connection limits hold over HTTP/2 whatever the server's stream limit (issue 61): lighttpd
/// allows 8 streams per connection, so 200 requests at once would need 25 connections; libcurl
/// opened 16 of them even with `--concurrency 4`. The rule (README "Connections: the budget per
/// protocol"): never more than `--concurrency` connections in all, and never more than
/// `--per-host-max` to one host. lighttpd logs each request's client port: one port, one connection.
final class ConnectionLimitTests: SpoolTestCase {
    private let count = 200

    private func fetchFromLighttpd(_ extra: [String]) throws -> (ports: Set<Int>, protocols: Set<String>) {
        let certDir = spool.path("tmp", "certs")
        let root = spool.path("tmp", "www")
        for dir in [certDir, root] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        let certs = try TestCertificates(in: certDir)
        for i in 0..<count {
            try Data(TestBody.random(count: 8 << 10, seed: UInt64(i))).write(to: URL(fileURLWithPath: root + "/f\(i)"))
        }
        let server = try LighttpdServer(root: root, certificate: certs.serverCertificate, key: certs.serverKey)
        try spool.drop("batch", (0..<count).map { server.url("/f\($0)") + "\n" }.joined())
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--ca-file", certs.caCertificate] + extra,
                                                       timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasSuffix(".done") }.count, count + 1, "markers and the group's")
        for i in [0, count / 2, count - 1] {
            XCTAssertEqual(try spool.read("final", "f\(i)"), TestBody.random(count: 8 << 10, seed: UInt64(i)))
        }
        server.stop()
        let log = server.requestLog()
        XCTAssertEqual(log.filter { $0.status == 200 }.count, count, "every file served once")
        return (Set(log.map(\.remotePort)), Set(log.map(\.proto)))
    }

    func testConcurrencyBoundsHTTP2ConnectionsToAServerWithFewStreams() throws {
        let seen = try fetchFromLighttpd(["--concurrency", "4"])
        XCTAssertEqual(seen.protocols, ["HTTP/2.0"])
        print("lighttpd, --concurrency 4: \(seen.ports.count) connections")
        XCTAssertLessThanOrEqual(seen.ports.count, 4, "--concurrency 4: never more than 4 connections")
        XCTAssertGreaterThanOrEqual(seen.ports.count, 1)
    }

    func testPerHostMaxBoundsHTTP2ConnectionsWithTheDefaults() throws {
        let seen = try fetchFromLighttpd([])
        XCTAssertEqual(seen.protocols, ["HTTP/2.0"])
        print("lighttpd, defaults: \(seen.ports.count) connections")
        XCTAssertLessThanOrEqual(seen.ports.count, 16, "the defaults: never more than --per-host-max (16) to one host")
    }

    func testASmallerPerHostMaxHoldsOverHTTP2() throws {
        let seen = try fetchFromLighttpd(["--per-host", "2", "--per-host-max", "3"])
        XCTAssertEqual(seen.protocols, ["HTTP/2.0"])
        print("lighttpd, --per-host-max 3: \(seen.ports.count) connections")
        XCTAssertLessThanOrEqual(seen.ports.count, 3)
    }
}
