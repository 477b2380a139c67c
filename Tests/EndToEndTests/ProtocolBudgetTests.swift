import Foundation
import NIOCore
import SpoolTestSupport
import XCTest

/// `--per-host` counts connections: over HTTP/2 one host's requests are streams of one
/// connection; over HTTP/1.1 each request has a connection of its own, `--per-host` at first and
/// up to `--per-host-max` while each added connection adds throughput.
/// nginx (TLS, and HTTP/2 when asked) in front of an origin that answers each request 50 ms late;
/// nginx logs each request's client connection, the origin counts the requests waiting at once.
final class ProtocolBudgetTests: SpoolTestCase {
    private let count = 200

    private func fetchBatch(http2: Bool, extra: [String] = []) throws
        -> (connections: Set<Int>, protocols: Set<String>, origin: Int, stderr: String) {
        let certDir = spool.path("tmp", "certs")
        try FileManager.default.createDirectory(atPath: certDir, withIntermediateDirectories: true)
        let certs = try TestCertificates(in: certDir)
        var text = ""
        for i in 0..<count {
            server.serve("/small/\(i)", body: TestBody.random(count: 16 << 10, seed: UInt64(i)),
                         script: [.delayed(.milliseconds(50))])
        }
        let nginx = try NginxServer(root: certDir, certificate: certs.serverCertificate, key: certs.serverKey,
                                    http2: http2, proxyTo: "http://127.0.0.1:\(server.port)")
        for i in 0..<count { text += nginx.url("/small/\(i)", scheme: "https") + "\n" }
        try spool.drop("batch", text)
        // The defaults: --concurrency 16 --per-host 6 --max-streams 100.
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--ca-file", certs.caCertificate] + extra,
                                                       timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        for i in [0, count / 2, count - 1] {
            XCTAssertEqual(try spool.read("final", "\(i)"), TestBody.random(count: 16 << 10, seed: UInt64(i)))
        }
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasSuffix(".done") }.count, count + 1, "markers and the group's")
        let log = nginx.requestLog()
        XCTAssertEqual(log.count, count, "every item fetched once")
        return (Set(log.map(\.connection)), Set(log.map(\.proto)), server.maxConcurrentDelayed, stderr)
    }

    func testOverHTTP2ABatchToOneHostRunsManyStreamsOnOneConnection() throws {
        let seen = try fetchBatch(http2: true)
        XCTAssertEqual(seen.protocols, ["HTTP/2.0"])
        XCTAssertEqual(seen.connections.count, 1, "one connection to the host")
        XCTAssertGreaterThan(seen.origin, 30, "many requests in flight at once, far beyond --per-host 6")
        print("HTTP/2: \(seen.connections.count) connection, \(seen.origin) requests at the origin at once")
    }

    func testOverHTTP11EachRequestHasAConnectionAndPerHostHolds() throws {
        let seen = try fetchBatch(http2: false, extra: ["--per-host-max", "6"])
        XCTAssertEqual(seen.protocols, ["HTTP/1.1"])
        XCTAssertLessThanOrEqual(seen.origin, 6, "--per-host 6 --per-host-max 6: six requests at once")
        XCTAssertGreaterThanOrEqual(seen.origin, 2, "in parallel")
        XCTAssertLessThanOrEqual(seen.connections.count, count)
        print("HTTP/1.1: \(seen.connections.count) connections, \(seen.origin) requests at the origin at once")
    }

    /// The defaults over HTTP/1.1 against a server 50 ms away: the host starts at six connections
    /// and gains more while each adds throughput, never past `--per-host-max` (16), and the log
    /// says why.
    func testOverHTTP11AHostGainsConnectionsWhileThroughputRisesUpToPerHostMax() throws {
        let seen = try fetchBatch(http2: false)
        XCTAssertEqual(seen.protocols, ["HTTP/1.1"])
        XCTAssertGreaterThan(seen.origin, 6, "more than --per-host at once: the host gained connections")
        XCTAssertLessThanOrEqual(seen.origin, 16, "never more than --per-host-max")
        XCTAssertTrue(seen.stderr.contains("msg=\"host connections\"") && seen.stderr.contains("throughput rising"), seen.stderr)
        print("HTTP/1.1 adaptive: \(seen.connections.count) connections, \(seen.origin) requests at the origin at once")
    }

    /// `status --json` shows a busy HTTP/1.1 host's connections, its limit and why.
    func testStatusShowsABusyHostsConnectionsAndWhy() throws {
        var text = ""
        for i in 0..<600 {
            server.serve("/s/\(i)", body: TestBody.random(count: 4096, seed: UInt64(i)), script: [.delayed(.milliseconds(50))])
            text += server.url("/s/\(i)") + "\n"
        }
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)
        try spool.drop("busy", text)
        var seen: [String: Any]?
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 60, what: "a status report with a host grown past --per-host") {
            for name in self.spool.files(in: "status") where name.hasSuffix(".json") {
                guard let bytes = try? self.spool.read("status", name),
                      let report = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                      let daemon = report["daemon"] as? [String: Any],
                      let hosts = daemon["busyHosts"] as? [[String: Any]],
                      let host = hosts.first, (host["limit"] as? Int ?? 0) > 6 else { continue }
                seen = host
                return true
            }
            return false
        }
        let host = try XCTUnwrap(seen)
        XCTAssertEqual(host["host"] as? String, "127.0.0.1:\(server.port)")
        XCTAssertEqual(host["why"] as? String, "throughput rising")
        XCTAssertLessThanOrEqual(host["connections"] as? Int ?? 99, host["limit"] as? Int ?? 0)
        XCTAssertLessThanOrEqual(host["limit"] as? Int ?? 99, 16)
    }
}
