import Foundation
import SpoolTestSupport
import XCTest

/// `retry` of an item a deadline cut (issue 61): the retried request gets a deadline that has not
/// passed — one counted from the claim counts again, a passed RFC 3339 one is dropped unless
/// `retry --deadline` gives a new one — and resumes the kept partial.
final class RetryDeadlineTests: SpoolTestCase {
    private let body = TestBody.random(count: 4_000_000, seed: 21)

    /// An item cut by an absolute deadline two to three seconds away (the body takes about 6 s), its partial kept; the request in failed/.
    private func cutByAnAbsoluteDeadline() throws -> Int {
        server.serve("/slow", body: body, etag: "\"v1\"", script: [.slow(chunkSize: 65_536, interval: .milliseconds(100))])
        let at = rfc3339(Date().addingTimeInterval(3))
        try spool.drop("cut", "deadline: \(at)\nurl: \(server.url("/slow"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertEqual((try json("failed", "cut.error")["items"] as? [[String: Any]])?.first?["code"] as? String, "deadline")
        let kept = try XCTUnwrap(try json("staging", "cut.0.kept.state")["bytes"] as? Int)
        XCTAssertGreaterThan(kept, 0)
        XCTAssertLessThan(kept, body.count)
        return kept
    }

    func testARetryDropsAPassedAbsoluteDeadlineAndResumesTheKeptPartial() throws {
        let kept = try cutByAnAbsoluteDeadline()
        server.serve("/slow", body: body, etag: "\"v1\"")
        let retry = try DaemonProcess.launch(["retry", "cut", "--spool", spool.root])
        XCTAssertEqual(try retry.waitForExit(timeout: 30), 0, retry.stderrText)
        XCTAssertTrue(retry.stdoutText.contains("1 partial(s)"), retry.stdoutText)
        XCTAssertTrue(retry.stdoutText.contains("had passed and was dropped"), retry.stdoutText)
        let (again, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 60)
        XCTAssertEqual(again, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "slow")), TestBody.sha256Hex(body), "byte-identical")
        let resumed = try XCTUnwrap(server.requests(for: "/slow").last)
        XCTAssertEqual(resumed.header("Range"), "bytes=\(kept)-", "resumed from the kept offset")
        XCTAssertEqual(resumed.header("If-Range"), "\"v1\"")
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    /// `retry --deadline` gives the retried items a new deadline: 1 s, and the server still slow,
    /// so the retried item is cut again by it (without it, it would have been published).
    func testRetryDeadlineTakesEffect() throws {
        _ = try cutByAnAbsoluteDeadline()
        let bad = try DaemonProcess.launch(["retry", "cut", "--deadline", "tomorrow", "--spool", spool.root])
        XCTAssertEqual(try bad.waitForExit(timeout: 30), 64, bad.stderrText)
        XCTAssertTrue(bad.stderrText.contains("--deadline must be an RFC 3339 time"), bad.stderrText)
        let passed = try DaemonProcess.launch(["retry", "cut", "--deadline", "2020-01-01T00:00:00Z", "--spool", spool.root])
        XCTAssertEqual(try passed.waitForExit(timeout: 30), 64, passed.stderrText)
        XCTAssertTrue(passed.stderrText.contains("has passed already"), passed.stderrText)

        let retry = try DaemonProcess.launch(["retry", "cut", "--deadline", "1s", "--spool", spool.root])
        XCTAssertEqual(try retry.waitForExit(timeout: 30), 0, retry.stderrText)
        XCTAssertTrue(retry.stdoutText.contains("deadline 1s"), retry.stdoutText)
        let name = try XCTUnwrap(spool.files(in: "incoming").first { $0.hasPrefix("cut-retry-") })
        let text = String(decoding: try spool.read("incoming", name), as: UTF8.self)
        XCTAssertTrue(text.contains("\ndeadline: 1s\n"), text)
        let started = Date()
        let (again, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 60)
        XCTAssertEqual(again, 1, stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 20)
        let items = try XCTUnwrap(try json("failed", name + ".error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "deadline", "the new deadline cut it")
        XCTAssertFalse(spool.files(in: "final").contains("slow"))
    }
}
