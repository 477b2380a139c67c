import Foundation
import SpoolTestSupport
import XCTest

/// earliest-start, priority, the discretionary window, size bounds and completion hooks.
final class SchedulingTests: SpoolTestCase {
    private func rfc3339(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }

    func testItemIsNotRequestedBeforeItsEarliestStartAndFinishesRightAfter() throws {
        server.serve("/later", body: Array("later".utf8))
        let earliest = Date().addingTimeInterval(2)
        try spool.drop("later", "url: \(server.url("/later"))\nearliest-start: \(rfc3339(earliest))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        let request = try XCTUnwrap(server.requests(for: "/later").first)
        XCTAssertGreaterThanOrEqual(request.receivedAt.timeIntervalSince(earliest), 0, "never before earliest-start")
        XCTAssertLessThan(request.receivedAt.timeIntervalSince(earliest), 1.5, "started by a timer right at earliest-start")
        XCTAssertEqual(try spool.read("final", "later"), Array("later".utf8))
    }

    func testHighItemQueuedAfterLowIsRequestedFirstWithOneSlot() throws {
        server.serve("/low", body: Array("low".utf8))
        server.serve("/high", body: Array("high".utf8))
        try spool.drop("a-low", "url: \(server.url("/low"))\npriority: low\n")
        try spool.drop("b-high", "url: \(server.url("/high"))\npriority: high\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--concurrency", "1"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.allRequests.map(\.path), ["/high", "/low"])
    }

    func testHighItemPausesARunningLowOneWhichThenResumes() throws {
        let lowBody = TestBody.random(count: 6 << 20, seed: 1)
        server.serve("/low-big", body: lowBody, etag: "\"l\"",
                     script: [.slow(chunkSize: 32 << 10, interval: .milliseconds(20)), .normal])
        server.serve("/urgent", body: Array("urgent".utf8))
        try spool.drop("low", "url: \(server.url("/low-big"))\npriority: low\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--concurrency", "1"])
        defer { daemon.terminate() }
        // Bytes on disk, not just the part: a pause before the first byte has nothing to resume.
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "the low item's first bytes") {
            self.spool.files(in: "staging").contains { name in
                name.hasSuffix(".part") && ((try? FileManager.default.attributesOfItem(
                    atPath: self.spool.path("staging", name))[.size] as? Int) ?? 0) >= 64 << 10
            }
        }
        try spool.drop("high", "url: \(server.url("/urgent"))\npriority: high\n")
        try DirectoryWaiter.waitForFile("low.group.done", in: spool.path("final"), timeout: 60)
        XCTAssertTrue(spool.files(in: "final").contains("high.group.done"))
        let paths = server.allRequests.map(\.path)
        XCTAssertEqual(paths.first, "/low-big")
        XCTAssertEqual(paths.dropFirst().first, "/urgent", "the high item got the only slot at once")
        XCTAssertNotNil(server.requests(for: "/low-big").last?.header("Range"), "the paused item resumed from its partial")
        XCTAssertEqual(try spool.read("final", "low-big"), lowBody)
        let highDone = try FileManager.default.attributesOfItem(atPath: spool.path("final", "urgent.done"))[.modificationDate] as? Date
        let lowDone = try FileManager.default.attributesOfItem(atPath: spool.path("final", "low-big.done"))[.modificationDate] as? Date
        XCTAssertLessThan(try XCTUnwrap(highDone), try XCTUnwrap(lowDone))
    }

    func testDiscretionaryItemOutsideTheWindowIsNeverRequestedWhileNormalItemsComplete() throws {
        let f = DateFormatter()
        f.dateFormat = "HH:mm"
        let window = "\(f.string(from: Date().addingTimeInterval(2 * 3600)))-\(f.string(from: Date().addingTimeInterval(3 * 3600)))"
        server.serve("/night", body: Array("night".utf8))
        for i in 0..<5 { server.serve("/day\(i)", body: Array("day \(i)".utf8)) }
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--window", window])
        defer { daemon.terminate() }
        try spool.drop("nightly", "url: \(server.url("/night"))\ndiscretionary: yes\n")
        try spool.drop("daily", (0..<5).map { server.url("/day\($0)") }.joined(separator: "\n") + "\n")
        // The request file itself moving into done/ is the group's last step.
        try DirectoryWaiter.waitForFile("daily", in: spool.path("done"), timeout: 30)
        XCTAssertTrue(spool.files(in: "final").contains("daily.group.done"))
        XCTAssertEqual(server.requests(for: "/night").count, 0, "outside its window a discretionary item waits")
        XCTAssertEqual(spool.claimed(), ["nightly"], "still claimed, still pending")
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 0)
    }

    func testDiscretionaryItemWithoutWindowRunsWhenNothingElseWaits() throws {
        server.serve("/bg", body: Array("bg".utf8))
        server.serve("/fg", body: Array("fg".utf8))
        try spool.drop("a", "url: \(server.url("/bg"))\ndiscretionary: yes\n")
        try spool.drop("b", "url: \(server.url("/fg"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--concurrency", "1"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.allRequests.map(\.path), ["/fg", "/bg"])
    }

    func testGroupHookRunsExactlyOncePerRequestFileWithTheMarkerPath() throws {
        server.serve("/g1", body: Array("1".utf8))
        server.serve("/g2", body: Array("2".utf8))
        let log = spool.path("tmp", "hooks.log")
        try spool.drop("first", server.url("/g1") + "\n" + server.url("/g2") + "\n")
        try spool.drop("second", "group: named\n" + server.url("/g1") + "?again\nname: again\n")
        let hook = "echo \"$SPOOLFETCH_GROUP|$SPOOLFETCH_MARKER|$SPOOLFETCH_STATUS\" >> '\(log)'"
        let itemHook = "echo \"item|$SPOOLFETCH_ID|$SPOOLFETCH_PATH|$SPOOLFETCH_SHA256|$SPOOLFETCH_BYTES\" >> '\(log)'"
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--on-group", hook, "--on-item", itemHook])
        XCTAssertEqual(status, 0, stderr)
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        let groupLines = lines.filter { !$0.hasPrefix("item|") }.sorted()
        XCTAssertEqual(groupLines, [
            "first|\(spool.path("final", "first.group.done"))|published",
            "named|\(spool.path("final", "named.group.done"))|published",
        ])
        let itemLines = lines.filter { $0.hasPrefix("item|") }
        XCTAssertEqual(itemLines.count, 3)
        XCTAssertTrue(itemLines.contains("item|first#0|\(spool.path("final", "g1"))|\(TestBody.sha256Hex(Array("1".utf8)))|1"),
                      itemLines.joined(separator: "\n"))
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "no group journal is left once the hooks ran")
    }

    /// The state a crash leaves between writing the group marker and running the group hook —
    /// here right after the request's move, before its items' staging files were removed.
    private func leaveAGroupEndedBeforeItsHook() throws {
        try FileManager.default.createDirectory(atPath: spool.path("staging"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: spool.path("done"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: spool.path("final"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: spool.path("final", "crashed.group.done"),
                                       contents: Data(#"{"group":"crashed","request":"crashed","finishedAt":"x","published":1,"failed":0,"items":[]}"#.utf8))
        _ = FileManager.default.createFile(atPath: spool.path("done", "crashed"), contents: Data())
        _ = FileManager.default.createFile(atPath: spool.path("staging", "crashed.group"),
                                       contents: Data(#"{"request":"crashed","marker":"crashed.group.done"}"#.utf8))
        for leftover in ["crashed.0.state", "crashed.7.part"] {
            _ = FileManager.default.createFile(atPath: spool.path("staging", leftover), contents: Data("{}".utf8))
        }
    }

    func testGroupJournalThatACrashLeftGoesAtTheNextStartWithoutAGroupHook() throws {
        try leaveAGroupEndedBeforeItsHook()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "no hook to run: the journal is not kept, nor the items' files")
        XCTAssertTrue(spool.files(in: "final").contains("crashed.group.done"))
    }

    func testGroupHookThatACrashPreventedRunsOnceAtTheNextStart() throws {
        try leaveAGroupEndedBeforeItsHook()
        let log = spool.path("tmp", "hooks.log")
        let hook = "echo \"$SPOOLFETCH_GROUP|$SPOOLFETCH_MARKER\" >> '\(log)'"
        for _ in 0..<2 {
            let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--on-group", hook])
            XCTAssertEqual(status, 0, stderr)
        }
        XCTAssertEqual(try String(contentsOfFile: log, encoding: .utf8),
                       "crashed|\(spool.path("final", "crashed.group.done"))\n", "run once, and only once, across two starts")
    }

    /// btrfs after a power cut: the group ended and the request was filed in done/, but its old
    /// name in the dead worker's folder survived too (one inode, two names). The adopter drops
    /// the old name and finishes that group end — its hook runs now, once — instead of working
    /// the request again and filing it a second time (as `crashed-1`).
    func testARequestFiledInDoneAndStillInADeadWorkersFolderIsNotWorkedAgain() throws {
        try leaveAGroupEndedBeforeItsHook()
        // The daemon names a group journal after its request file's inode (`R.INODE.group`).
        let inode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: spool.path("done", "crashed"))[.systemFileNumber] as? Int)
        XCTAssertEqual(rename(spool.path("staging", "crashed.group"), spool.path("staging", "crashed.\(inode).group")), 0)
        let dead = spool.path("active", "deadhost-1-x")
        try FileManager.default.createDirectory(atPath: dead, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dead + "/.lock", contents: Data())
        XCTAssertEqual(link(spool.path("done", "crashed"), dead + "/crashed"), 0)
        let log = spool.path("tmp", "hooks.log")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--on-group", "echo \"$SPOOLFETCH_GROUP\" >> '\(log)'"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try String(contentsOfFile: log, encoding: .utf8), "crashed\n", "the pending hook ran, once")
        XCTAssertEqual(spool.files(in: "done"), ["crashed"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: dead + "/crashed"))
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    func testBodyFarLargerThanExpectedBytesFailsUnlessMaxBytesAllowsIt() throws {
        server.serve("/big", body: TestBody.random(count: 50_000, seed: 3))
        try spool.drop("bounded", "url: \(server.url("/big"))\nexpected-bytes: 10000\n")
        try spool.drop("allowed", "url: \(server.url("/big"))\nname: big2\nexpected-bytes: 10000\nmax-bytes: 100k\n")
        let (status, _) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1)
        let error = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(spool.read("failed", "bounded.error"))) as? [String: Any])
        let item = try XCTUnwrap((error["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(item["code"] as? String, "too-large")
        XCTAssertTrue((item["message"] as? String ?? "").contains("expected-bytes"))
        XCTAssertEqual(try spool.read("final", "big2").count, 50_000)
        XCTAssertFalse(spool.files(in: "final").contains("big"))
    }

    func testMaxRateSlowsTheWholeDaemon() throws {
        let body = TestBody.random(count: 4_000_000, seed: 4)
        server.serve("/r1", body: body)
        server.serve("/r2", body: body)
        try spool.drop("rated", server.url("/r1") + "\n" + server.url("/r2") + "\n")
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--max-rate", "4M"])
        XCTAssertEqual(status, 0, stderr)
        // 8 MB at 4 MiB/s shared: close to 2 s. libcurl lets about the first megabyte through at
        // full speed (its limiter averages over the transfer), so the bound is loose: this is a
        // behaviour bound (a limit is applied), not a benchmark.
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 1.2)
        XCTAssertEqual(try spool.read("final", "r1"), body)
    }
}
