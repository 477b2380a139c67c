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
}
