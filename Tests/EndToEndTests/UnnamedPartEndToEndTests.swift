import Foundation
import SpoolTestSupport
import XCTest

/// A small body's part starts unnamed (`O_TMPFILE`, see `UnnamedPartSupport`). On the real daemon:
/// such a part has no name in `staging/` while it arrives, and gets one — so it is resumed —
/// whenever the daemon keeps it for later (a retry, a stop).
final class UnnamedPartEndToEndTests: SpoolTestCase {
    func testACutSmallBodyIsResumedFromItsPartial() throws {
        let body = TestBody.random(count: 600_000, seed: 21)
        server.serve("/small-cut", body: body, etag: "\"c\"", script: [.cut(afterBytes: 250_000), .normal])
        try spool.drop("smallcut", server.url("/small-cut") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--retry-base", "0.05"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "small-cut"), body)
        XCTAssertEqual(server.requests(for: "/small-cut").count, 2)
        XCTAssertEqual(server.requests(for: "/small-cut").last?.header("Range"), "bytes=250000-", "the retry resumes")
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    func testASmallBodysPartIsUnnamedWhileItArrivesAndNamedWhenTheDaemonStops() throws {
        let body = TestBody.random(count: 600_000, seed: 22)
        server.serve("/small-stop", body: body, etag: "\"s\"", script: [.stall(afterBytes: 200_000), .normal])
        try spool.drop("smallstop", server.url("/small-stop") + "\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--stall-timeout", "60"])
        defer { daemon.terminate() }
        // Its writes reach the folder's inotify watch as IN_MODIFY of `#INODE`.
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "200000 bytes in an unnamed part") {
            daemon.openParts(in: self.spool.path("staging")).contains { $0.isUnnamed && $0.size >= 200_000 }
        }
        XCTAssertEqual(spool.files(in: "staging").filter { $0.hasSuffix(".part") }, [], "no name while it arrives")
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 0, daemon.stderrText)
        let staging = spool.files(in: "staging")
        XCTAssertEqual(staging.filter { $0.hasSuffix(".part") }.count, 1, "named at the stop: \(staging)")
        XCTAssertEqual(staging.filter { $0.hasSuffix(".state") }.count, 1, "with its resume state: \(staging)")

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "small-stop"), body)
        XCTAssertEqual(server.requests(for: "/small-stop").last?.header("Range"), "bytes=200000-", "the next run resumes")
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }
}
