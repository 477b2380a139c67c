import Foundation
import SpoolTestSupport
import XCTest

/// The content store (`--store`): bodies verified against their `sha256:` are kept by digest, and
/// later items with that digest are published from the store without a request — once per digest
/// however many items, requests and workers want it.
final class ContentStoreTests: SpoolTestCase {
    /// Every GET the server saw for `paths`.
    private func gets(_ paths: [String]) -> Int { paths.reduce(0) { $0 + server.requests(for: $1).count } }

    private func storeEntry(_ digest: String) -> String {
        spool.root + "/store/sha256/" + digest.prefix(2) + "/" + digest
    }

    func testThreeRequestsOfTwentyItemsOverTenDigestsMakeTenGETsAndSixtyFilesWithMarkers() throws {
        let bodies = (0..<10).map { TestBody.random(count: 20_000 + $0 * 997, seed: UInt64(100 + $0)) }
        var paths: [String] = []
        for r in 0..<3 {
            var text = ""
            for i in 0..<20 {
                // Each item its own URL: the store knows bytes by digest, not by URL.
                let path = "/r\(r)/f\(i).bin"
                server.serve(path, body: bodies[i % 10])
                paths.append(path)
                text += "url: \(server.url(path))\nname: r\(r)-\(i).bin\nsha256: \(TestBody.sha256Hex(bodies[i % 10]))\n"
            }
            try spool.drop("req\(r)", text)
        }
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--log-level", "debug"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(gets(paths), 10, "one GET per digest")
        var fromStore = 0
        for r in 0..<3 {
            for i in 0..<20 {
                XCTAssertEqual(try spool.read("final", "r\(r)-\(i).bin"), bodies[i % 10])
                let marker = try json("final", "r\(r)-\(i).bin.done")
                XCTAssertEqual(marker["sha256"] as? String, TestBody.sha256Hex(bodies[i % 10]))
                XCTAssertEqual(marker["bytes"] as? Int, bodies[i % 10].count)
                if marker["source"] as? String == "store" { fromStore += 1 }
            }
        }
        XCTAssertEqual(fromStore, 50, "the other 50 were published from the store")
        for body in bodies {
            let digest = TestBody.sha256Hex(body)
            var st = stat()
            XCTAssertEqual(stat(storeEntry(digest), &st), 0, "entry sha256/\(digest.prefix(2))/\(digest)")
            XCTAssertEqual(st.st_mode & 0o777, 0o444, "entries are read-only")
            XCTAssertEqual(try Array(Data(contentsOf: URL(fileURLWithPath: storeEntry(digest)))), body)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.root + "/store/tmp"), [], "no temp files left")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.root + "/store/claims"), [], "no claims left")
    }

    func testALaterRunPublishesFromTheStoreWithoutARequestAndOnExistsApplies() throws {
        let body = TestBody.random(count: 300_000, seed: 7)
        let digest = TestBody.sha256Hex(body)
        server.serve("/a.bin", body: body)
        try spool.drop("first", "url: \(server.url("/a.bin"))\nsha256: \(digest)\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/a.bin").count, 1)
        XCTAssertNil(try json("final", "a.bin.done")["source"], "fetched from its URL: no source")

        // The same digest again under its name (keep both: a -1 name), and with on-exists: replace.
        try spool.drop("again", "url: \(server.url("/a.bin"))\nsha256: \(digest)\n")
        try spool.drop("replace", "on-exists: replace\nurl: \(server.url("/other.bin"))\nname: a.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/a.bin").count, 1, "no request for a digest in the store")
        XCTAssertEqual(server.requests(for: "/other.bin").count, 0, "the URL is never asked: the store has the bytes")
        XCTAssertEqual(try spool.read("final", "a-1.bin"), body)
        XCTAssertEqual(try spool.read("final", "a.bin"), body)
        let marker = try json("final", "a-1.bin.done")
        XCTAssertEqual(marker["source"] as? String, "store")
        XCTAssertEqual(marker["sha256"] as? String, digest)
        XCTAssertEqual(marker["bytes"] as? Int, body.count)
        XCTAssertEqual(try json("final", "a.bin.done")["source"] as? String, "store", "replaced by the store's copy")
        XCTAssertFalse(spool.files(in: "final").contains("a-2.bin"), "replace takes the name, never a -N one")
        // A copy, not the store's file: the consumer may edit it.
        var published = stat(), entry = stat()
        XCTAssertEqual(stat(spool.path("final", "a-1.bin"), &published), 0)
        XCTAssertEqual(stat(storeEntry(digest), &entry), 0)
        XCTAssertNotEqual(published.st_ino, entry.st_ino)
    }

    func testStoreLinkHardlinkPublishesTheEntryItself() throws {
        let body = TestBody.random(count: 40_000, seed: 8)
        let digest = TestBody.sha256Hex(body)
        server.serve("/h.bin", body: body)
        try spool.drop("one", "url: \(server.url("/h.bin"))\nsha256: \(digest)\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        try spool.drop("two", "url: \(server.url("/h.bin"))\nname: h2.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--store-link", "hardlink"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/h.bin").count, 1)
        XCTAssertEqual(try spool.read("final", "h2.bin"), body)
        XCTAssertEqual(try json("final", "h2.bin.done")["source"] as? String, "store")
        var published = stat(), entry = stat()
        XCTAssertEqual(stat(spool.path("final", "h2.bin"), &published), 0)
        XCTAssertEqual(stat(storeEntry(digest), &entry), 0)
        XCTAssertEqual(published.st_ino, entry.st_ino, "hardlink: one inode")
    }

    func testABodyThatDoesNotMatchItsSha256NeverEntersTheStoreAndItemsWithoutSha256AreNotStored() throws {
        let body = TestBody.random(count: 10_000, seed: 9)
        let wrong = TestBody.sha256Hex(Array("not this".utf8))
        server.serve("/w.bin", body: body)
        server.serve("/n.bin", body: body)
        try spool.drop("bad", "url: \(server.url("/w.bin"))\nsha256: \(wrong)\n")
        try spool.drop("plain", "url: \(server.url("/n.bin"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--max-attempts", "1"])
        XCTAssertEqual(status, 1, stderr)
        XCTAssertEqual(try spool.read("final", "n.bin"), body)
        let shards = (try? FileManager.default.contentsOfDirectory(atPath: spool.root + "/store/sha256")) ?? []
        XCTAssertEqual(shards, [], "nothing verified against a sha256: nothing stored")
    }

    func testAStoreElsewhereAndWithoutTheFlagTheStoreIsNotUsed() throws {
        let body = TestBody.random(count: 5_000, seed: 10)
        let digest = TestBody.sha256Hex(body)
        server.serve("/s.bin", body: body)
        let elsewhere = try TempSpool()
        try spool.drop("one", "url: \(server.url("/s.bin"))\nsha256: \(digest)\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", elsewhere.root + "/cas"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: elsewhere.root + "/cas/sha256/" + digest.prefix(2) + "/" + digest))
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.root + "/store"))
        try spool.drop("two", "url: \(server.url("/s.bin"))\nname: s2.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/s.bin").count, 2, "without --store every item is fetched")
    }
}
