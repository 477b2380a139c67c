import Foundation
import SpoolTestSupport
import XCTest

/// Servers that limit their clients: nginx closing HTTP/2 connections after a number of requests
/// (`keepalive_requests`, a GOAWAY) and nginx refusing requests past a rate (`limit_req`, 429).
final class PoliteServerTests: SpoolTestCase {
    private func files(_ count: Int, size: Int, in www: String) throws -> [[UInt8]] {
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        return try (0..<count).map { i in
            let body = TestBody.random(count: size, seed: UInt64(9000 + i))
            try Data(body).write(to: URL(fileURLWithPath: "\(www)/f\(i).bin"))
            return body
        }
    }

    private func markers(_ names: [String]) throws -> [[String: Any]] {
        try names.map { name in
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try spool.read("final", name + ".done"))) as? [String: Any])
        }
    }

    /// nginx sends GOAWAY after every 100 requests on an HTTP/2 connection: the streams it did not
    /// take go on a new connection, each item on its first attempt, none failed.
    func testGoawayEvery100RequestsOverHTTP2CostsNoAttempt() throws {
        let certDir = spool.path("tmp", "certs")
        try FileManager.default.createDirectory(atPath: certDir, withIntermediateDirectories: true)
        let certs = try TestCertificates(in: certDir)
        let www = spool.path("tmp", "www")
        let count = 500
        let bodies = try files(count, size: 16 << 10, in: www)
        let nginx = try NginxServer(root: www, certificate: certs.serverCertificate, key: certs.serverKey, http2: true,
                                    serverDirectives: "keepalive_requests 100;")
        try spool.drop("many", (0..<count).map { nginx.url("/f\($0).bin", scheme: "https") }.joined(separator: "\n") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--ca-file", certs.caCertificate], timeout: 180)
        XCTAssertEqual(status, 0, stderr)
        for i in 0..<count { XCTAssertEqual(try spool.read("final", "f\(i).bin"), bodies[i], "f\(i).bin") }
        let attempts = try markers((0..<count).map { "f\($0).bin" }).map { $0["attempts"] as? Int ?? 0 }
        XCTAssertEqual(attempts.filter { $0 != 1 }.count, 0, "items on a second attempt: \(attempts.filter { $0 != 1 }.count)")
        let log = nginx.requestLog()
        XCTAssertGreaterThanOrEqual(Set(log.map(\.connection)).count, count / 100, "nginx closed a connection every 100 requests")
        XCTAssertTrue(log.allSatisfy { $0.proto == "HTTP/2.0" })
    }

    /// nginx allows 40 requests a second from the host and answers 429 beyond (`limit_req`):
    /// the daemon paces its requests to what the server allows; every item is published on its
    /// first attempt, nothing fails.
    func testA429ServerIsPacedAndNothingFails() throws {
        let www = spool.path("tmp", "www")
        let count = 300
        let bodies = try files(count, size: 16 << 10, in: www)
        // Its own floor: 300 requests at 40 a second, 7.5 s (timings are for Benchmarks/).
        let nginx = try NginxServer(root: www,
                                    httpDirectives: "limit_req_zone $binary_remote_addr zone=host:1m rate=40r/s;",
                                    serverDirectives: "limit_req zone=host; limit_req_status 429;")
        try spool.drop("paced", (0..<count).map { nginx.url("/f\($0).bin") }.joined(separator: "\n") + "\n")
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 180)
        let seconds = Date().timeIntervalSince(started)
        XCTAssertEqual(status, 0, stderr)
        for i in 0..<count { XCTAssertEqual(try spool.read("final", "f\(i).bin"), bodies[i], "f\(i).bin") }
        let attempts = try markers((0..<count).map { "f\($0).bin" }).map { $0["attempts"] as? Int ?? 0 }
        XCTAssertEqual(attempts.filter { $0 != 1 }.count, 0, "items on a later attempt")
        let log = nginx.sentLog()
        let refused = log.filter { $0.status == 429 }.count
        print("paced: \(count) files in \(seconds) s, \(refused) answered 429")
        XCTAssertGreaterThan(refused, 0, "the server did refuse requests past its rate")
        XCTAssertLessThanOrEqual(refused, count / 5, "the daemon slowed down instead of hammering the server")
        XCTAssertTrue(stderr.contains("pacing them"), "the log says the host is paced")
    }
}
