import Foundation
import SpoolTestSupport
import XCTest

/// Bodies large enough to be written and hashed on a writer thread (128 KiB and more in one
/// attempt, `BodyWriter`): the digest must still cover exactly the bytes on disk when an attempt
/// ends half-way — a cut connection retried in the same daemon, a pause and a resume — and the
/// resumed attempt, large again, must continue from the carried state. Each request names the body's SHA-256, so a wrong digest fails
/// the item (`sha256-mismatch`) instead of passing unnoticed.
final class LargeBodyHashTests: SpoolTestCase {
    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText)
    }

    private func task(_ id: String) throws -> [String: Any]? {
        let r = try cli(["status", "--json", "--spool", spool.root])
        let report = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        return (report?["tasks"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    /// Serves `body` at `/NAME`, cut after `cutAfter` bytes and then answered in full; the drain
    /// must publish it whole with the right digest, resumed with a range from `resumedFrom` on.
    private func assertCutBodyIsResumedWithTheRightDigest(_ body: [UInt8], name: String, cutAfter: Int,
                                                          resumedFrom: Int, _ why: String) throws {
        server.serve("/\(name)", body: body, etag: "\"\(name)\"", script: [.cut(afterBytes: cutAfter), .normal])
        try spool.drop(name, "url: \(server.url("/\(name)"))\nname: \(name).bin\nsha256: \(TestBody.sha256Hex(body))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--retry-base", "0.05"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "\(name).bin"), body)
        XCTAssertEqual(try json("final", "\(name).bin.done")["sha256"] as? String, TestBody.sha256Hex(body))
        let range = try XCTUnwrap(server.requests(for: "/\(name)").last?.header("Range"), "the retry resumes with a range")
        let offset = Int(range.dropFirst(6).dropLast()) ?? -1
        XCTAssertGreaterThanOrEqual(offset, resumedFrom, why)
    }

    func testLargeBodyCutPastTheHashThresholdIsResumedWithTheRightDigest() throws {
        // Cut after 9 MiB (the writer thread is running by then), then answer the range in full:
        // the second attempt carries the first one's state and is large enough to hash on its own
        // thread again.
        try assertCutBodyIsResumedWithTheRightDigest(TestBody.random(count: 13 << 20, seed: 31), name: "big",
                                                     cutAfter: 9 << 20, resumedFrom: 4 << 20,
                                                     "resumed well past the point where hashing left the receiving thread")
    }

    /// The common case since the threshold came down to 128 KiB: a body of about 1 MiB, not a
    /// multiple of the writer thread's 256 KiB blocks, cut between two blocks and resumed.
    func testMidSizeBodyCutPastTheHashThresholdIsResumedWithTheRightDigest() throws {
        try assertCutBodyIsResumedWithTheRightDigest(TestBody.random(count: (1 << 20) + 12_345, seed: 33), name: "mid",
                                                     cutAfter: 700 << 10, resumedFrom: 128 << 10,
                                                     "resumed past the point where hashing left the receiving thread")
    }

    func testLargeBodyPausedPastTheHashThresholdResumesWithTheRightDigest() throws {
        let body = TestBody.random(count: 12 << 20, seed: 32)
        server.serve("/p", body: body, etag: "\"p\"", script: [.stall(afterBytes: 7 << 20), .normal])
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try spool.drop("pausable", "url: \(server.url("/p"))\nname: p.bin\nsha256: \(TestBody.sha256Hex(body))\n")
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 60, what: "pausable#0 past 5 MiB") {
            ((try? self.task("pausable#0"))??["bytes"] as? Int ?? 0) >= 5 << 20
        }
        let paused = try cli(["pause", "pausable#0", "--spool", spool.root])
        XCTAssertEqual(paused.status, 0, paused.err)
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "pausable#0 paused") {
            ((try? self.task("pausable#0"))??["state"] as? String) == "paused"
        }
        let resumed = try cli(["resume", "pausable#0", "--spool", spool.root])
        XCTAssertEqual(resumed.status, 0, resumed.err)
        try DirectoryWaiter.waitForFile("pausable.group.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(try spool.read("final", "p.bin"), body)
        XCTAssertEqual(try json("final", "p.bin.done")["sha256"] as? String, TestBody.sha256Hex(body))
        let range = try XCTUnwrap(server.requests(for: "/p").last?.header("Range"), "resume continues from the kept partial")
        XCTAssertGreaterThanOrEqual(Int(range.dropFirst(6).dropLast()) ?? -1, 4 << 20)
    }
}
