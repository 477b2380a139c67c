import Foundation
import SpoolTestSupport
import XCTest

/// A pause is the operator's, not a failure: pausing and resuming a running item spends no
/// attempt, so it never fails an item for `--max-attempts`.
final class PauseAttemptTests: SpoolTestCase {
    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText)
    }

    private func task(_ id: String) -> [String: Any]? {
        guard let r = try? cli(["status", "--json", "--spool", spool.root]),
              let object = try? JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] else { return nil }
        return (object["tasks"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    private func waitFor(_ what: String, _ predicate: @escaping ([String: Any]) -> Bool) throws {
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 60, what: what) {
            self.task("slow#0").map(predicate) ?? false
        }
    }

    func testPausingAndResumingThreeTimesSpendsNoAttempt() throws {
        let body = TestBody.random(count: 3 << 20, seed: 61)
        // About 10 s for the whole body: three requests slow enough to be paused part-way, then
        // the fourth (after the third resume) at full speed.
        let slow = ResponseBehavior.slow(chunkSize: 16 << 10, interval: .milliseconds(50))
        server.serve("/slow", body: body, etag: "\"s\"", script: [slow, slow, slow, .normal])
        try spool.drop("slow", server.url("/slow") + "\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--max-attempts", "2",
                                               "--max-segments", "1"])   // one stream: one request per round
        defer { daemon.terminate() }
        var before = 0
        for round in 1...3 {
            try waitFor("slow#0 running past \(before) bytes (round \(round))") {
                $0["state"] as? String == "running" && ($0["bytes"] as? Int ?? 0) > before
            }
            let paused = try cli(["pause", "slow#0", "--spool", spool.root])
            XCTAssertEqual(paused.status, 0, paused.err)
            try waitFor("slow#0 paused (round \(round))") { $0["state"] as? String == "paused" }
            let shown = try XCTUnwrap(task("slow#0"))
            XCTAssertEqual(shown["attempts"] as? Int, 0, "a paused item has spent no attempt (round \(round)): \(shown)")
            before = shown["bytes"] as? Int ?? 0
            let resumed = try cli(["resume", "slow#0", "--spool", spool.root])
            XCTAssertEqual(resumed.status, 0, resumed.err)
        }
        try DirectoryWaiter.waitForFile("slow.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(try spool.read("final", "slow"), body)
        let marker = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(spool.read("final", "slow.done"))) as? [String: Any])
        XCTAssertEqual(marker["attempts"] as? Int, 1, "three pauses and resumes spent no attempt: \(marker)")
        XCTAssertEqual(spool.files(in: "failed"), [], "never failed for --max-attempts 2")
        XCTAssertGreaterThanOrEqual(server.requests(for: "/slow").count, 4, "each resume asked again")
    }
}
