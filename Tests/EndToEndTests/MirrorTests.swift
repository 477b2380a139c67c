import Foundation
import SpoolTestSupport
import XCTest

/// `mirror:` sources: the next one when the first cannot serve the item, and never a file joined
/// from two versions.
final class MirrorTests: SpoolTestCase {
    var other: TestHTTPServer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        other = try TestHTTPServer.start()
    }

    override func tearDownWithError() throws {
        try other.shutdown()
        other = nil
        try super.tearDownWithError()
    }

    func testTheFirstSource404sAndTheMirrorPublishes() throws {
        let body = TestBody.random(count: 50_000, seed: 1)
        other.serve("/a.bin", body: body)
        try spool.drop("gone", "url: \(server.url("/a.bin?token=T"))\nmirror: \(other.url("/a.bin"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "a.bin"), body)
        XCTAssertEqual(server.requests(for: "/a.bin").count, 1)
        let marker = try json("final", "a.bin.done")
        XCTAssertEqual(marker["source"] as? Int, 1)
        XCTAssertEqual(marker["url"] as? String, other.url("/a.bin"))
        XCTAssertEqual(marker["finalURL"] as? String, other.url("/a.bin"))
        XCTAssertNil(marker["urlQuerySha256"], "the mirror's URL has no query")
    }

    func testAFirstSourceUnreachablePastMirrorAfterMovesToTheMirror() throws {
        // A port nothing listens on any more: connections are refused (an outage, no attempt used).
        let dead = try TestHTTPServer.start()
        let deadURL = dead.url("/x.bin")
        try dead.shutdown()
        let body = TestBody.random(count: 30_000, seed: 2)
        other.serve("/x.bin", body: body)
        other.serve("/y.bin", body: Array("y".utf8))
        // Two items of the dead host: one probes it, the other waits behind it; both move on.
        try spool.drop("outage", """
            url: \(deadURL)
            mirror: \(other.url("/x.bin"))
            url: \(dead.url("/y.bin"))
            mirror: \(other.url("/y.bin"))
            """)
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--mirror-after", "1"], timeout: 60)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1, "not before --mirror-after")
        XCTAssertTrue(stderr.contains("host unreachable"), stderr)
        XCTAssertTrue(stderr.contains("moving on to another source"), stderr)
        XCTAssertEqual(try spool.read("final", "x.bin"), body)
        XCTAssertEqual(try spool.read("final", "y.bin"), Array("y".utf8))
        XCTAssertEqual(try json("final", "y.bin.done")["source"] as? Int, 1)
        let marker = try json("final", "x.bin.done")
        XCTAssertEqual(marker["source"] as? Int, 1)
        XCTAssertEqual(marker["attempts"] as? Int, 1, "the outage used no attempt")
    }

    func testSourcesWithDifferentValidatorsAreNeverSplicedAndTheSameStrongETagKeepsTheBytes() throws {
        let first = TestBody.random(count: 2 << 20, seed: 3)
        let second = TestBody.random(count: 2 << 20, seed: 4)      // another version, same size
        let same = TestBody.random(count: 2 << 20, seed: 5)
        // The first source cuts each body after 512 KiB, then is gone (404).
        server.serve("/v.bin", body: first, etag: "\"one\"", script: [.cut(afterBytes: 512 << 10), .status(404)])
        server.serve("/s.bin", body: same, etag: "\"same\"", script: [.cut(afterBytes: 512 << 10), .status(404)])
        other.serve("/v.bin", body: second, etag: "\"two\"")
        other.serve("/s.bin", body: same, etag: "\"same\"")
        try spool.drop("versions", """
            url: \(server.url("/v.bin"))
            mirror: \(other.url("/v.bin"))
            url: \(server.url("/s.bin"))
            mirror: \(other.url("/s.bin"))
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--retry-base", "0.1"])
        XCTAssertEqual(status, 0, stderr)
        // Another version: asked with If-Range, answered whole, the first bytes dropped.
        XCTAssertEqual(try spool.read("final", "v.bin"), second, "never first's head on second's tail")
        let askedV = try XCTUnwrap(other.requests(for: "/v.bin").first)
        XCTAssertEqual(askedV.header("If-Range"), "\"one\"")
        XCTAssertEqual(try json("final", "v.bin.done")["sha256"] as? String, TestBody.sha256Hex(second))
        // The same strong ETag at the mirror: the resume keeps the 512 KiB on disk.
        XCTAssertEqual(try spool.read("final", "s.bin"), same)
        let askedS = try XCTUnwrap(other.requests(for: "/s.bin").first)
        XCTAssertEqual(askedS.header("Range"), "bytes=\(512 << 10)-")
        XCTAssertEqual(askedS.header("If-Range"), "\"same\"")
        XCTAssertEqual(other.bodyBytesSent, second.count + same.count - (512 << 10))
        // The group marker lists each item by its own URL, though both ended on the mirror.
        let items = try XCTUnwrap(try json("final", "versions.group.done")["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["url"] as? String }, [server.url("/v.bin"), server.url("/s.bin")])
    }
}
