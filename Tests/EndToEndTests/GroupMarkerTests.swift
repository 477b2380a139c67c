import Foundation
import SpoolTestSupport
import XCTest

/// `markers: group`: every file published atomically, no per-file markers, one group marker
/// listing each file's facts — end to end with the real daemon.
final class GroupMarkerTests: SpoolTestCase {
    func testFiftyFilesArePublishedWithOnlyTheGroupMarkerListingEachFile() throws {
        var bodies: [String: [UInt8]] = [:]
        var request = "markers: group\ngroup: fifty\n"
        for i in 0..<50 {
            let body = TestBody.random(count: 500 + 37 * i, seed: UInt64(100 + i))
            bodies["f\(i).bin"] = body
            server.serve("/g/f\(i).bin", body: body, etag: "\"g\(i)\"")
            request += server.url("/g/f\(i).bin") + "\n"
        }
        try spool.drop("fifty", request)
        let log = spool.path("tmp", "hooks.log")
        let itemHook = "echo \"$SPOOLFETCH_STATUS|$SPOOLFETCH_PATH|[$SPOOLFETCH_MARKER]|$SPOOLFETCH_SHA256\" >> '\(log)'"
        let groupHook = "echo \"group|$SPOOLFETCH_MARKER\" >> '\(log)'"
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--on-item", itemHook, "--on-group", groupHook])
        XCTAssertEqual(status, 0, stderr)

        for (name, body) in bodies {
            XCTAssertEqual(try spool.read("final", name), body, "\(name) must be byte-identical")
        }
        let markers = spool.files(in: "final").filter { $0.hasSuffix(".done") }
        XCTAssertEqual(markers, ["fifty.group.done"], "no per-file marker")
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix(".") }, [], "no temp files left")

        let group = try json("final", "fifty.group.done")
        XCTAssertEqual(group["published"] as? Int, 50)
        XCTAssertEqual(group["failed"] as? Int, 0)
        let items = try XCTUnwrap(group["items"] as? [[String: Any]])
        XCTAssertEqual(items.count, 50)
        for item in items {
            let file = try XCTUnwrap(item["file"] as? String)
            let body = try XCTUnwrap(bodies[file], "listed file \(file) is one of the request's")
            XCTAssertEqual(item["sha256"] as? String, TestBody.sha256Hex(try spool.read("final", file)))
            XCTAssertEqual(item["sha256"] as? String, TestBody.sha256Hex(body))
            XCTAssertEqual(item["bytes"] as? Int, body.count)
            XCTAssertEqual(item["httpStatus"] as? Int, 200)
            XCTAssertEqual(item["url"] as? String, server.url("/g/" + file))
            XCTAssertEqual(item["finalURL"] as? String, server.url("/g/" + file))
            XCTAssertNil(item["marker"], "no per-file marker to name")
        }

        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.filter { $0.hasPrefix("group|") }, ["group|\(spool.path("final", "fifty.group.done"))"])
        let itemLines = lines.filter { !$0.hasPrefix("group|") }
        XCTAssertEqual(itemLines.count, 50)
        let body7 = try XCTUnwrap(bodies["f7.bin"])
        XCTAssertTrue(itemLines.contains("published|\(spool.path("final", "f7.bin"))|[]|\(TestBody.sha256Hex(body7))"),
                      "the item hook gets the file's path and an empty marker:\n" + itemLines.joined(separator: "\n"))
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    func testPerFileModeGroupMarkerKeepsItsShape() throws {
        server.serve("/p", body: Array("per file".utf8))
        try spool.drop("plain", server.url("/p") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        let items = try XCTUnwrap(try json("final", "plain.group.done")["items"] as? [[String: Any]])
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(Set(items[0].keys), ["index", "url", "outcome", "file", "marker"],
                       "per-file mode lists no facts its markers already hold")
        XCTAssertEqual(items[0]["marker"] as? String, "p.done")
    }

    func testKillNineAfterTheFirstFileDoesNotFetchOrPublishItAgain() throws {
        try killNineAfterTheFirstFile(Array("first item".utf8), etag: nil)
    }

    /// A body of 1 MiB or more with a validator keeps its `B.state` (phase running, written when
    /// it began) until the group ends; the batch journal that published it is newer and must win
    /// after a crash, or the file is fetched again and published a second time as `one-1.txt`.
    func testKillNineAfterALargeFirstFileWithAResumeStateDoesNotFetchOrPublishItAgain() throws {
        try killNineAfterTheFirstFile(TestBody.random(count: 2 << 20, seed: 13), etag: "\"f\"")
    }

    /// Two items under `markers: group`, `kill -9` once the first is published, then a drain.
    private func killNineAfterTheFirstFile(_ first: [UInt8], etag: String?) throws {
        let second = TestBody.random(count: 4 << 20, seed: 12)
        // A large first body arrives over ~320 ms, so that the engine sees it begin while it runs
        // (and writes its resume state) rather than after it has ended.
        server.serve("/first", body: first, etag: etag,
                     script: etag == nil ? [] : [.slow(chunkSize: 128 << 10, interval: .milliseconds(20))])
        server.serve("/second", body: second, etag: "\"s\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(20)), .normal])
        try spool.drop("pair", "markers: group\n" + server.url("/first") + "\nname: one.txt\n"
                       + server.url("/second") + "\nname: two.bin\n")
        let doomed = try DaemonProcess.launch(["run", "--spool", spool.root])
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 30, what: "the first item's file") {
            self.spool.files(in: "final").contains("one.txt")
        }
        doomed.signal(SIGKILL)
        XCTAssertEqual(try doomed.waitForExit(timeout: 10), 128 + SIGKILL)
        XCTAssertEqual(spool.claimed(), ["pair"], "the request is still open: its second item runs")
        if etag != nil {
            XCTAssertTrue(spool.files(in: "staging").contains("pair.0.state"),
                          "the premise: the published item's resume state is still there")
        }

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/first").count, 1, "the published item is not fetched again")
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("one") }, ["one.txt"],
                       "nor published twice, and no per-file marker written by the recovery")
        XCTAssertEqual(try spool.read("final", "one.txt"), first)
        XCTAssertEqual(try spool.read("final", "two.bin"), second)
        let items = try XCTUnwrap(try json("final", "pair.group.done")["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["file"] as? String }, ["one.txt", "two.bin"])
        XCTAssertEqual(items.map { $0["sha256"] as? String }, [TestBody.sha256Hex(first), TestBody.sha256Hex(second)],
                       "the recovered item's facts come from the journal")
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "the dead run's journal is spent")
    }
}
