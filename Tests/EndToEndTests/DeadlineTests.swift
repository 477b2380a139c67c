import Foundation
import SpoolTestSupport
import XCTest

/// `deadline:`: "by 06:00 or not at all". An item not ended by its deadline fails with code
/// `deadline` whatever it waits for (a host that stays down, a transfer that is still running),
/// and its group ends instead of waiting up to the resource timeout.
final class DeadlineTests: SpoolTestCase {
    private func closedPortURL() throws -> String {
        let gone = try TestHTTPServer.start()
        let port = gone.port
        try gone.shutdown()
        return "http://127.0.0.1:\(port)/x"
    }

    func testADownHostsItemFailsAtItsDeadlineAndTheGroupEnds() throws {
        server.serve("/ok", body: Array("ok".utf8))
        try spool.drop("nightly", "deadline: 2s\nurl: \(try closedPortURL())\nurl: \(server.url("/ok"))\n")
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 20, "not the 7-day resource timeout")
        let items = try XCTUnwrap(json("failed", "nightly.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["index"] as? Int }, [0])
        XCTAssertEqual(items.first?["code"] as? String, "deadline")
        XCTAssertEqual(try spool.read("final", "ok"), Array("ok".utf8), "the other item is published")
        XCTAssertTrue(spool.files(in: "final").contains("nightly.group.done"))
        XCTAssertTrue(stderr.contains("deadline passed"), stderr)
    }

    func testAnItemsOwnDeadlineCutsItsTransferAndLeavesTheOthersAlone() throws {
        // 2 MB at 64 KiB every 100 ms takes about 3 s: its own deadline of 1 s cuts it.
        server.serve("/slow", body: TestBody.random(count: 2_000_000, seed: 1), script: [.slow(chunkSize: 65_536, interval: .milliseconds(100))])
        server.serve("/fast", body: Array("fast".utf8))
        try spool.drop("mixed", "url: \(server.url("/slow"))\ndeadline: 1s\nurl: \(server.url("/fast"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        let items = try XCTUnwrap(json("failed", "mixed.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "deadline")
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(try spool.read("final", "fast"), Array("fast".utf8))
        XCTAssertFalse(spool.files(in: "final").contains("slow"))
    }

    /// A deadline that passes mid-transfer fails the item with `deadline` but keeps what it
    /// fetched: `spoolfetch retry` resumes it with a Range from the kept offset, under the same
    /// validator, and publishes the whole file.
    func testAPartialCutByTheDeadlineIsKeptAndRetryResumesIt() throws {
        let body = TestBody.random(count: 2_000_000, seed: 7)
        server.serve("/slow", body: body, etag: "\"v1\"", script: [.slow(chunkSize: 65_536, interval: .milliseconds(100))])
        try spool.drop("cut", "deadline: 1s\nurl: \(server.url("/slow"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        let items = try XCTUnwrap(json("failed", "cut.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "deadline")
        XCTAssertTrue(stderr.contains("partial kept for spoolfetch retry"), stderr)
        let keptState = try json("staging", "cut.0.kept.state")
        let kept = try XCTUnwrap(keptState["bytes"] as? Int)
        XCTAssertGreaterThan(kept, 0, "bytes were fetched before the deadline")
        XCTAssertLessThan(kept, body.count)
        let keptPart = try FileManager.default.attributesOfItem(atPath: spool.path("staging", "cut.0.kept.part"))
        XCTAssertGreaterThanOrEqual((keptPart[.size] as? NSNumber)?.intValue ?? 0, kept)

        server.serve("/slow", body: body, etag: "\"v1\"")
        let retry = try DaemonProcess.launch(["retry", "cut", "--spool", spool.root])
        XCTAssertEqual(try retry.waitForExit(timeout: 30), 0, retry.stderrText)
        XCTAssertTrue(retry.stdoutText.contains("1 partial(s)"), retry.stdoutText)
        XCTAssertFalse(spool.files(in: "staging").contains("cut.0.kept.part"), "handed to the retry")
        let (again, stderr2) = try DaemonProcess.drain(spool: spool.root, timeout: 60)
        XCTAssertEqual(again, 0, stderr2)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "slow")), TestBody.sha256Hex(body), "the whole file, byte-identical")
        let resumed = try XCTUnwrap(server.requests(for: "/slow").last)
        XCTAssertEqual(resumed.header("Range"), "bytes=\(kept)-", "resumed from the kept offset")
        XCTAssertEqual(resumed.header("If-Range"), "\"v1\"")
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    func testADefaultDeadlineAppliesAndABadOneIsRefusedWithItsLine() throws {
        try spool.drop("late", "url: \(try closedPortURL())\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--deadline", "1s"], timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertEqual((try json("failed", "late.error")["items"] as? [[String: Any]])?.first?["code"] as? String, "deadline")

        try spool.drop("typo", "url: http://127.0.0.1:1/x\ndeadline: tomorrow\n")
        let (status2, stderr2) = try DaemonProcess.drain(spool: spool.root, timeout: 60)
        XCTAssertEqual(status2, 1, stderr2)
        let error = try String(contentsOfFile: spool.path("rejected", "typo.error"), encoding: .utf8)
        XCTAssertTrue(error.contains("deadline must be an RFC 3339 time"), error)
        XCTAssertTrue(error.contains("\"line\":2") || error.contains("\"line\" : 2"), error)
    }
}
