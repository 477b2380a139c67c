import Foundation
import NIOCore
import SpoolTestSupport
import XCTest

/// A segmented body handed out in pieces, in order, and hashed as its contiguous prefix grows
/// (`SegmentSet`, `PrefixFollower`): the marker's digest is the published bytes' digest.
final class SegmentPieceTests: SpoolTestCase {
    private let size = 24 << 20

    private func marker(_ name: String) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try spool.read("final", name + ".done"))) as? [String: Any])
    }

    /// More pieces than connections are asked, closed ranges that tile the body, and the
    /// marker's `sha256` is that of the file published, which is the server's body.
    func testPiecesGoInOrderAndTheMarkersDigestIsThePublishedBytes() throws {
        let body = TestBody.random(count: size, seed: 6301)
        // About 6.4 MB/s per connection: long enough for the body to be split.
        server.serve("/pieces.bin", body: body, etag: "\"p1\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(10))])
        try spool.drop("pieces", server.url("/pieces.bin") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        let published = try spool.read("final", "pieces.bin")
        let done = try marker("pieces.bin")
        XCTAssertEqual(done["sha256"] as? String, TestBody.sha256Hex(published), "the marker's digest is the published bytes'")
        XCTAssertEqual(TestBody.sha256Hex(published), TestBody.sha256Hex(body), "byte-identical")
        XCTAssertEqual(done["connections"] as? Int, 6)
        let ranges = server.requests(for: "/pieces.bin").compactMap { $0.header("Range") }.compactMap { range -> [Int]? in
            let spec = range.dropFirst("bytes=".count).split(separator: "-").compactMap { Int($0) }
            return range.hasPrefix("bytes=") && spec.count == 2 ? spec : nil
        }.sorted { $0[0] < $1[0] }
        XCTAssertGreaterThan(ranges.count, 6, "more pieces than connections: \(ranges)")
        // The pieces tile the body after the primary's first one: each begins where the one
        // before it ends (a tail taken over by work stealing begins inside the range it came from).
        let first = try XCTUnwrap(ranges.first)
        var end = first[1]
        for r in ranges.dropFirst() {
            XCTAssertLessThanOrEqual(r[0], end + 1, "a hole before \(r): \(ranges)")
            end = max(end, r[1])
        }
        XCTAssertEqual(end, size - 1, "the last piece ends with the body")
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    /// Behind an HTTP/2 primary (nginx, TLS) a finished piece's HTTP/1.1 connection carries the
    /// next piece instead of a new TCP and TLS handshake; and those connections stay the pieces'
    /// own (`configurePieceConnection`): libcurl gives an idle connection of the host to the next
    /// transfer that asks, and once the host's HTTP/2 connection is gone the next item would run
    /// over HTTP/1.1 on one of them. nginx ends each connection after 20 requests: 19 small items
    /// and the body's own request fill the HTTP/2 one, so it is gone when the next item starts,
    /// while the pieces' connections (a few pieces each) are idle in the pool.
    func testPiecesBehindAnHTTP2PrimaryReuseTheirConnectionsAndItemsDoNot() throws {
        let certDir = spool.path("tmp", "certs")
        try FileManager.default.createDirectory(atPath: certDir, withIntermediateDirectories: true)
        let certs = try TestCertificates(in: certDir)
        let www = spool.path("tmp", "www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let body = TestBody.random(count: size, seed: 6302)
        try Data(body).write(to: URL(fileURLWithPath: www + "/h2.bin"))
        let small = TestBody.random(count: 16 << 10, seed: 6303)
        for i in 0..<20 { try Data(small).write(to: URL(fileURLWithPath: www + "/s\(i).bin")) }
        // 4 MiB/s per connection: the body is split, and its pieces outnumber its connections.
        let nginx = try NginxServer(root: www, certificate: certs.serverCertificate, key: certs.serverKey, http2: true,
                                    rateLimit: "4m", serverDirectives: "keepalive_requests 20;")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--ca-file", certs.caCertificate])
        defer { daemon.terminate() }
        try spool.drop("warm", (0..<19).map { nginx.url("/s\($0).bin", scheme: "https") }.joined(separator: "\n") + "\n")
        try DirectoryWaiter.waitForFile("s18.bin.done", in: spool.path("final"), timeout: 60)
        try spool.drop("h2", nginx.url("/h2.bin", scheme: "https") + "\n")
        try DirectoryWaiter.waitForFile("h2.bin.done", in: spool.path("final"), timeout: 120)
        let pieces = nginx.requestLog().filter { $0.proto == "HTTP/1.1" }
        let pieceConnections = Set(pieces.map(\.connection))
        try spool.drop("next", nginx.url("/s19.bin", scheme: "https") + "\n")
        try DirectoryWaiter.waitForFile("s19.bin.done", in: spool.path("final"), timeout: 60)

        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "h2.bin")), TestBody.sha256Hex(body))
        XCTAssertEqual(try marker("h2.bin")["sha256"] as? String, TestBody.sha256Hex(body))
        XCTAssertEqual(try marker("h2.bin")["connections"] as? Int, 6)
        XCTAssertGreaterThan(pieces.count, pieceConnections.count,
                             "a finished piece's connection carried the next piece: \(pieces)")
        let next = try XCTUnwrap(nginx.requestLog().last)
        XCTAssertEqual(next.proto, "HTTP/2.0", "the host's next item is a stream: \(nginx.requestLog())")
        XCTAssertFalse(pieceConnections.contains(next.connection), "not a request on a piece's connection")
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "s19.bin")), TestBody.sha256Hex(small))
    }
}
