import Foundation
import SpoolTestSupport
import XCTest

/// `on-exists:` — what a re-fetch does with a final name already taken: `keep-both` (a `-N`
/// name), `replace` (the new file and marker take the old ones' place), `skip-unchanged` (a
/// conditional request; a 304 publishes nothing). End to end with the real daemon.
final class OnExistsTests: SpoolTestCase {
    private func inode(_ path: String) -> UInt64? {
        var st = stat()
        return stat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    func testKeepBothIsTheDefaultAndAddsASuffix() throws {
        server.serve("/k", body: Array("one".utf8))
        try spool.drop("k1", server.url("/k") + "\nname: k.txt\n")
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 0)
        try spool.drop("k2", "on-exists: keep-both\n" + server.url("/k") + "\nname: k.txt\n")
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 0)
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("k.") || $0.hasPrefix("k-") },
                       ["k-1.txt", "k-1.txt.done", "k.txt", "k.txt.done"])
    }

    func testReplaceRunTwicePublishesTheNewContentUnderTheSameNameWithAMarkerDescribingIt() throws {
        let old = Array("the old report".utf8)
        let new = Array("the new report, longer".utf8)
        server.serve("/r", body: old, etag: "\"v1\"")
        try spool.drop("first", "on-exists: replace\n" + server.url("/r") + "\nname: report.csv\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "report.csv"), old)
        let oldInode = inode(spool.path("final", "report.csv"))

        server.serve("/r", body: new, etag: "\"v2\"")
        try spool.drop("second", server.url("/r") + "\nname: report.csv\non-exists: replace\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)

        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("report") }, ["report.csv", "report.csv.done"],
                       "replaced, never a -N name")
        XCTAssertEqual(try spool.read("final", "report.csv"), new)
        XCTAssertNotEqual(inode(spool.path("final", "report.csv")), oldInode, "a new file renamed over the old one")
        let marker = try json("final", "report.csv.done")
        XCTAssertEqual(marker["request"] as? String, "second")
        XCTAssertEqual(marker["sha256"] as? String, TestBody.sha256Hex(new))
        XCTAssertEqual(marker["bytes"] as? Int, new.count)
        XCTAssertEqual(marker["etag"] as? String, "\"v2\"")
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix(".") }, [], "no temp files left")
    }

    func testSkipUnchangedAgainstNginxSendsTheValidatorsGets304AndPublishesNothing() throws {
        let root = try wwwRoot()
        let body = TestBody.random(count: 20_000, seed: 304)
        try Data(body).write(to: URL(fileURLWithPath: root + "/nightly.bin"))
        let nginx = try NginxServer(root: root)
        let request = "on-exists: skip-unchanged\n" + nginx.url("/nightly.bin") + "\n"
        let log = spool.path("tmp", "hooks.log")
        let hook = "echo \"$SPOOLFETCH_STATUS|$SPOOLFETCH_PATH|$SPOOLFETCH_MARKER|$SPOOLFETCH_SHA256\" >> '\(log)'"

        try spool.drop("night1", request)
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--on-item", hook])
        XCTAssertEqual(status, 0, stderr)
        let first = try json("final", "nightly.bin.done")
        let etag = try XCTUnwrap(first["etag"] as? String, "nginx sends an ETag")
        XCTAssertNotNil(first["lastModified"] as? String)
        let firstInode = inode(spool.path("final", "nightly.bin"))
        let markerBytes = try spool.read("final", "nightly.bin.done")

        try spool.drop("night2", request)
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--on-item", hook, "--log-level", "debug"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("nightly") }, ["nightly.bin", "nightly.bin.done"],
                       "nothing new published")
        XCTAssertEqual(inode(spool.path("final", "nightly.bin")), firstInode, "the file is untouched")
        XCTAssertEqual(try spool.read("final", "nightly.bin.done"), markerBytes, "and so is its marker")
        let group = try json("final", "night2.group.done")
        XCTAssertEqual(group["unchanged"] as? Int, 1)
        XCTAssertEqual(group["published"] as? Int, 0)
        XCTAssertEqual(group["failed"] as? Int, 0)
        let item = try XCTUnwrap((group["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(item["outcome"] as? String, "unchanged")
        XCTAssertEqual(item["file"] as? String, "nightly.bin")
        XCTAssertTrue(spool.files(in: "done").contains("night2"), "the request ends in done/")
        XCTAssertTrue(stderr.contains("unchanged (304)"), "the 304 is what ended it (nginx answers it only to a matching validator)")
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2)
        XCTAssertEqual(lines.last, "unchanged|\(spool.path("final", "nightly.bin"))|\(spool.path("final", "nightly.bin.done"))|\(TestBody.sha256Hex(body))")

        // The resource changes: a 200, and the new version replaces the old one under its name.
        let changed = TestBody.random(count: 21_000, seed: 305)
        try Data(changed).write(to: URL(fileURLWithPath: root + "/nightly.bin"))
        try spool.drop("night3", request)
        (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("nightly") }, ["nightly.bin", "nightly.bin.done"])
        XCTAssertEqual(try spool.read("final", "nightly.bin"), changed)
        let third = try json("final", "nightly.bin.done")
        XCTAssertEqual(third["sha256"] as? String, TestBody.sha256Hex(changed))
        XCTAssertNotEqual(third["etag"] as? String, etag)
    }

    /// Under `markers: group` a 304 publishes no marker either: the group marker is where the
    /// existing file's facts (the marker the conditional request was asked on) are listed, and
    /// the item hook's `SPOOLFETCH_SHA256` is theirs. The item's published phase keeps them
    /// from the 304's event to its group's end.
    func testSkipUnchangedUnderGroupMarkersListsTheExistingFilesFactsInTheGroupMarker() throws {
        let root = try wwwRoot()
        let body = TestBody.random(count: 30_000, seed: 3041)
        try Data(body).write(to: URL(fileURLWithPath: root + "/weekly.bin"))
        let nginx = try NginxServer(root: root)
        try spool.drop("week1", "on-exists: skip-unchanged\n" + nginx.url("/weekly.bin") + "\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try json("final", "weekly.bin.done")["sha256"] as? String, TestBody.sha256Hex(body))

        let log = spool.path("tmp", "hooks.log")
        let hook = "echo \"$SPOOLFETCH_STATUS|$SPOOLFETCH_SHA256\" >> '\(log)'"
        try spool.drop("week2", "markers: group\non-exists: skip-unchanged\n" + nginx.url("/weekly.bin") + "\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--on-item", hook, "--log-level", "debug"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertTrue(stderr.contains("unchanged (304)"), "the premise: a 304 ended it")
        let group = try json("final", "week2.group.done")
        XCTAssertEqual(group["unchanged"] as? Int, 1)
        let item = try XCTUnwrap((group["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(item["outcome"] as? String, "unchanged")
        XCTAssertEqual(item["file"] as? String, "weekly.bin")
        XCTAssertEqual(item["sha256"] as? String, TestBody.sha256Hex(body), "the existing file's facts are listed")
        XCTAssertEqual(item["bytes"] as? Int, body.count)
        XCTAssertEqual(item["httpStatus"] as? Int, 200, "the status that published it, not the 304")
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, ["unchanged|\(TestBody.sha256Hex(body))"])
    }

    func testSkipUnchangedSendsIfNoneMatchAndIfModifiedSinceFromThePreviousMarker() throws {
        server.serve("/s", body: Array("v1".utf8), etag: "\"s1\"", lastModified: "Mon, 23 Nov 2026 10:00:00 GMT")
        try spool.drop("s1", "on-exists: skip-unchanged\n" + server.url("/s") + "\n")
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 0)
        XCTAssertNil(server.requests(for: "/s").first?.header("If-None-Match"), "nothing to compare with the first time")
        try spool.drop("s2", "on-exists: skip-unchanged\n" + server.url("/s") + "\n")
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 0)
        let second = try XCTUnwrap(server.requests(for: "/s").last)
        XCTAssertEqual(second.header("If-None-Match"), "\"s1\"")
        XCTAssertEqual(second.header("If-Modified-Since"), "Mon, 23 Nov 2026 10:00:00 GMT")
    }

    /// A folder nginx serves, removed when the test ends.
    private func wwwRoot() throws -> String {
        let root = NSTemporaryDirectory() + "/spoolfetch-www-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: root) }
        return root
    }
}
