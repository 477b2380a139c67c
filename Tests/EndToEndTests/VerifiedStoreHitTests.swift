import Foundation
import SpoolTestSupport
import XCTest

/// Every published byte is verified (issue 59): a content-store hit hashes the bytes it publishes;
/// the marker's `sha256` is that computed digest, never the entry's name. An entry whose bytes
/// were altered on disk (same name, other bytes) is removed, logged with both digests and its
/// path, and the item fetches from its server; a good entry is published without a request.
final class VerifiedStoreHitTests: SpoolTestCase {
    private func entryPath(_ digest: String) -> String {
        spool.root + "/store/sha256/" + digest.prefix(2) + "/" + digest
    }

    /// Puts `bytes` into the store under the name `digest`, read-only, as the daemon would.
    private func putEntry(_ digest: String, _ bytes: [UInt8]) throws {
        let shard = spool.root + "/store/sha256/" + digest.prefix(2)
        try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: entryPath(digest), contents: Data(bytes)))
        XCTAssertEqual(chmod(entryPath(digest), 0o444), 0)
    }

    private func fileSHA256(_ folder: String, _ name: String) throws -> String {
        TestBody.sha256Hex(try spool.read(folder, name))
    }

    /// The rotten entry: same name and size, one byte in the middle changed (a stray `dd`).
    private func rottenRound(link: String) throws {
        let body = TestBody.random(count: 3 << 20, seed: 5901)
        let digest = TestBody.sha256Hex(body)
        var rotten = body
        rotten[body.count / 2] ^= 0x5A
        let rottenDigest = TestBody.sha256Hex(rotten)
        try putEntry(digest, rotten)
        server.serve("/b.bin", body: body)
        try spool.drop("wants", "url: \(server.url("/b.bin"))\nname: b.bin\nsha256: \(digest)\n")

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--store-link", link])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/b.bin").count, 1, "the server is asked: the entry was not served")
        XCTAssertEqual(try spool.read("final", "b.bin"), body, "the published bytes are the server's")
        let marker = try json("final", "b.bin.done")
        XCTAssertEqual(marker["sha256"] as? String, try fileSHA256("final", "b.bin"), "the marker's digest is the file's")
        XCTAssertEqual(marker["sha256"] as? String, digest)
        XCTAssertNil(marker["source"], "fetched from its URL, not the store")
        // The rotten entry is gone, replaced by the good body once it was fetched.
        XCTAssertEqual(TestBody.sha256Hex(try Array(Data(contentsOf: URL(fileURLWithPath: entryPath(digest))))), digest)
        let lines = stderr.split(separator: "\n").filter { $0.contains("store entry does not match its name") }
        XCTAssertEqual(lines.count, 1, stderr)
        let line = String(lines.first ?? "")
        XCTAssertTrue(line.contains("expected=\(digest)"), line)
        XCTAssertTrue(line.contains("actual=\(rottenDigest)"), line)
        XCTAssertTrue(line.contains(entryPath(digest)), line)
        XCTAssertTrue(line.contains("removed"), line)
    }

    func testARottenEntryIsRemovedLoggedAndTheItemFetchesFromItsServer() throws {
        try rottenRound(link: "reflink")
    }

    func testARottenEntryUnderHardlinkIsNeverLinkedIntoTheFinalFolder() throws {
        try rottenRound(link: "hardlink")
    }

    /// A rotten entry the daemon cannot remove (immutable: `chattr +i`, which holds for root too)
    /// is never published: each item of its digest fetches from the server instead, and the log
    /// says it could not be removed.
    func testARottenEntryThatCannotBeRemovedIsNeverPublished() throws {
        let body = TestBody.random(count: 200_000, seed: 5903)
        let digest = TestBody.sha256Hex(body)
        var rotten = body
        rotten[10] ^= 0xFF
        try putEntry(digest, rotten)
        let chattr = try DaemonProcess.launch(["+i", entryPath(digest)], executable: "/usr/bin/chattr")
        XCTAssertEqual(try chattr.waitForExit(timeout: 10), 0, chattr.stderrText)
        defer { _ = try? DaemonProcess.launch(["-i", entryPath(digest)], executable: "/usr/bin/chattr").waitForExit(timeout: 10) }
        server.serve("/c.bin", body: body)
        try spool.drop("two", "url: \(server.url("/c.bin"))\nname: c1.bin\nsha256: \(digest)\n"
                           + "url: \(server.url("/c.bin"))\nname: c2.bin\nsha256: \(digest)\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/c.bin").count, 2, "both items fetch: the entry is never served")
        for name in ["c1.bin", "c2.bin"] {
            XCTAssertEqual(try spool.read("final", name), body, name)
            let marker = try json("final", name + ".done")
            XCTAssertEqual(marker["sha256"] as? String, try fileSHA256("final", name), name)
            XCTAssertNil(marker["source"], name)
        }
        XCTAssertTrue(stderr.contains("could not remove it"), stderr)
        XCTAssertEqual(try Array(Data(contentsOf: URL(fileURLWithPath: entryPath(digest)))), rotten, "still there, immutable")
    }

    /// A good entry: published without a request, its marker's digest that of the published file.
    func testAGoodHitPublishesTheDigestOfThePublishedBytesWithoutAskingTheServer() throws {
        let body = TestBody.random(count: 1 << 20, seed: 5902)
        let digest = TestBody.sha256Hex(body)
        try putEntry(digest, body)
        server.serve("/g.bin", body: body)
        try spool.drop("copy", "url: \(server.url("/g.bin"))\nname: g.bin\nsha256: \(digest)\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--log-level", "debug"])
        XCTAssertEqual(status, 0, stderr)
        try spool.drop("link", "url: \(server.url("/g.bin"))\nname: h.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--store-link", "hardlink"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/g.bin").count, 0, "a good entry is published without a request")
        for name in ["g.bin", "h.bin"] {
            XCTAssertEqual(try spool.read("final", name), body, name)
            let marker = try json("final", name + ".done")
            XCTAssertEqual(marker["source"] as? String, "store", name)
            XCTAssertEqual(marker["sha256"] as? String, try fileSHA256("final", name), name)
        }
        var published = stat(), entry = stat()
        XCTAssertEqual(stat(spool.path("final", "h.bin"), &published), 0)
        XCTAssertEqual(stat(entryPath(digest), &entry), 0)
        XCTAssertEqual(published.st_ino, entry.st_ino, "hardlink: the entry itself, hashed, then linked")
    }
}
