import Foundation
import SpoolTestSupport
import XCTest

/// A large file written under a second ago, from Apache: its ETag is weak (`W/"…"`) and its
/// Last-Modified is not taken by `If-Range` yet, so every range asked under either gets `200`.
/// The daemon asks again with the tag made strong until Apache's own tag is strong (`206`), and
/// checks the bytes its first, weak answer brought against the same range under the strong tag:
/// the file is segmented and nothing is ever spliced.
final class WeakValidatorTests: SpoolTestCase {
    private let size = 24 << 20
    /// 4 MiB/s per response (`mod_ratelimit`): one stream needs about 6 s for the body.
    private let kibPerSecond = 4096

    private func marker(_ name: String) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try spool.read("final", name + ".done"))) as? [String: Any])
    }

    /// A running daemon, so that the first request comes well inside the file's first second.
    private func runningDaemon() throws -> DaemonProcess {
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--retry-base", "0.2"])
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)
        return daemon
    }

    func testAFileWrittenUnderASecondAgoIsSegmentedOnceItsTagIsStrong() throws {
        let apache = try ApacheServer(kibPerSecond: kibPerSecond)
        let daemon = try runningDaemon()
        defer { daemon.terminate() }
        let body = TestBody.random(count: size, seed: 63)
        try apache.write("fresh.bin", body)
        try spool.drop("fresh", apache.url("/fresh.bin") + "\n")
        try DirectoryWaiter.waitForFile("fresh.bin.done", in: spool.path("final"), timeout: 60)
        let published = try spool.read("final", "fresh.bin")
        XCTAssertEqual(TestBody.sha256Hex(published), TestBody.sha256Hex(body), "fresh.bin byte-identical")
        let done = try marker("fresh.bin")
        XCTAssertEqual(done["sha256"] as? String, TestBody.sha256Hex(published), "the marker's sha256 is of the published bytes")
        XCTAssertGreaterThan(done["connections"] as? Int ?? 1, 1, "segmented, not one stream")
        XCTAssertLessThanOrEqual(done["connections"] as? Int ?? 99, 6, "the check of the first bytes is one of the host's six connections")
        let log = apache.requestLog()
        let ranged = log.filter { $0.range != "-" }
        XCTAssertTrue(ranged.contains { $0.status == 200 }, "a range was asked while the tag was weak: \(log)")
        XCTAssertTrue(ranged.contains { $0.status == 206 }, "and answered once it was strong: \(log)")
        XCTAssertTrue(ranged.allSatisfy { !$0.ifRange.hasPrefix("W/") && $0.ifRange.contains("\"") },
                      "every range names the tag made strong, never a weak tag or a date: \(log)")
        XCTAssertTrue(ranged.contains { $0.range.hasPrefix("bytes=0-") && $0.status == 206 },
                      "the first answer's bytes were fetched again under the strong tag: \(log)")
        XCTAssertEqual(log.filter { $0.range == "-" }.count, 1, "one body from byte 0: nothing was started over")
    }

    /// The file is replaced, inside its first second, by another of the same size and the same
    /// mtime: the tag and Last-Modified stay, so the strong tag's `206`s are of the new bytes
    /// while the first answer streams the old. A client that appends ranges to it (aria2c sends
    /// no `If-Range` at all) splices; the check of the first answer's bytes fails instead, and
    /// the item starts over and publishes the new version whole.
    func testAFileReplacedInItsFirstSecondUnderTheSameTagIsNotSpliced() throws {
        let apache = try ApacheServer(kibPerSecond: kibPerSecond)
        let daemon = try runningDaemon()
        defer { daemon.terminate() }
        let old = TestBody.random(count: size, seed: 64)
        let new = TestBody.random(count: size, seed: 65)
        let path = try apache.write("same.bin", old)
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        try spool.drop("same", apache.url("/same.bin") + "\n")
        // The first answer (of the old bytes) has begun: its part in staging has some of them.
        let staging = spool.path("staging")
        try DirectoryWaiter.wait(in: staging, timeout: 30, what: "the first bytes of same.bin in staging") {
            spool.files(in: "staging").contains { name in
                var s = stat()
                return !name.hasPrefix(".") && stat(staging + "/" + name, &s) == 0 && s.st_size > 0
            }
        }
        try apache.write("same.bin", new, mtime: st.st_mtim)
        try DirectoryWaiter.waitForFile("same.bin.done", in: spool.path("final"), timeout: 90)
        let published = try spool.read("final", "same.bin")
        XCTAssertTrue(published == new, "the new version, whole (old: \(published == old))")
        XCTAssertEqual(try marker("same.bin")["sha256"] as? String, TestBody.sha256Hex(published))
        let log = apache.requestLog()
        XCTAssertGreaterThanOrEqual(log.filter { $0.range == "-" }.count, 2, "started over from byte 0: \(log)")
        XCTAssertTrue(daemon.stderrText.contains("its bytes differ from the same range under If-Range"),
                      "the change was detected: \(daemon.stderrText.suffix(2000))")
    }
}
