import Foundation
import SpoolTestSupport
import XCTest

/// A request is one thing to operators: `cancel`, `pause`, `resume` of a request of thousands of
/// items answer at once and are logged once; its `.error` and group marker count the items that
/// ended alike and list them in a line-oriented file; a cancel holds across a kill before the
/// group ended. (The 200,000-item figures: `Benchmarks/request-commands`.)
final class RequestCommandTests: SpoolTestCase {
    /// More than `SpoolStore.listedFailuresLimit` (1,000): the records count instead of listing.
    private let count = 2500

    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String, seconds: Double) {
        let started = Date()
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText, Date().timeIntervalSince(started))
    }

    /// The daemon's own report's `daemon` object, once `predicate` holds for it.
    private func waitForReport(_ what: String, until predicate: @escaping ([String: Any]) -> Bool) throws {
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 120, what: what) {
            self.spool.files(in: "status").contains { name in
                guard name.hasSuffix(".json"), let bytes = try? self.spool.read("status", name),
                      let report = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                      let daemon = report["daemon"] as? [String: Any] else { return false }
                return predicate(daemon)
            }
        }
    }

    private func states(_ daemon: [String: Any]) -> [String: Int] { daemon["states"] as? [String: Int] ?? [:] }

    /// The request's items file's lines, read one at a time.
    private func lines(_ path: String) throws -> [[String: Any]] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return try text.split(separator: "\n").map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    private func list(_ urls: (Int) -> String, header: String = "") -> String {
        var text = header
        for i in 0..<count { text += urls(i) + "\n" }
        return text
    }

    func testAWholeRequestIsPausedResumedAndCancelledAsOneCommand() throws {
        let later = rfc3339(Date().addingTimeInterval(3600))
        try spool.drop("big", list({ self.server.url("/f/\($0)") }, header: "earliest-start: \(later)\n"))
        // Due before the big request's items, so that the daemon's report lists it among the next.
        try spool.drop("other", "url: \(server.url("/other"))\nearliest-start: \(rfc3339(Date().addingTimeInterval(1800)))\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try waitForReport("every item waiting") { self.states($0)["waiting-start"] == self.count + 1 }

        let paused = try cli(["pause", "big", "--spool", spool.root])
        XCTAssertEqual(paused.status, 0, paused.err)
        XCTAssertTrue(paused.out.contains("pause: \(count) item(s) of big (\(count) pending)"), paused.out)
        try waitForReport("the request paused") { self.states($0)["paused"] == self.count }
        let report = try JSONSerialization.jsonObject(with: Data(spool.read("status", spool.files(in: "status").first { $0.hasSuffix(".json") }!))) as? [String: Any]
        let listed = (report?["tasks"] as? [[String: Any]])?.filter { $0["state"] as? String == "paused" }.count ?? 0
        XCTAssertEqual(listed, 1000, "a paused request is counted, and only so many of its items listed")
        // `other`, paused after them, is listed nowhere: the client still reaches its daemon.
        let pausedOther = try cli(["pause", "other", "--spool", spool.root])
        XCTAssertEqual(pausedOther.status, 0, pausedOther.err)
        try waitForReport("the other request paused too") { self.states($0)["paused"] == self.count + 1 }
        let resumedOther = try cli(["resume", "other", "--spool", spool.root])
        XCTAssertEqual(resumedOther.status, 0, resumedOther.err)
        XCTAssertTrue(resumedOther.out.contains("resume: 1 item(s) of other (1 paused)"), resumedOther.out)
        let last = try cli(["resume", "big#\(count - 1)", "--spool", spool.root])
        XCTAssertEqual(last.status, 0, "an item past the listed ones: \(last.err)")
        XCTAssertTrue(last.out.contains("resume: 1 item"), last.out)
        let resumed = try cli(["resume", "big", "--spool", spool.root])
        XCTAssertEqual(resumed.status, 0, resumed.err)
        XCTAssertTrue(resumed.out.contains("resume: \(count - 1) item(s) of big (\(count - 1) paused); left as they were: 1 pending"),
                      resumed.out)
        try waitForReport("the request waiting again") { self.states($0)["waiting-start"] == self.count + 1 }

        // Nothing of it waits to retry: one answer, counted by state (not one clause per item).
        let retried = try cli(["retry", "big", "--spool", spool.root])
        XCTAssertEqual(retried.status, 2)
        XCTAssertTrue(retried.err.contains("nothing to retry: the \(count) item(s) of big are \(count) pending"), retried.err)

        let linesBefore = daemon.stderrText.split(separator: "\n").count
        let cancelled = try cli(["cancel", "big", "--spool", spool.root])
        XCTAssertEqual(cancelled.status, 0, cancelled.err)
        XCTAssertTrue(cancelled.out.contains("cancel: \(count) item(s) of big"), cancelled.out)
        // The next command is answered at once: the cancel left nothing for the engine to chew on.
        let next = try cli(["pause", "other", "--spool", spool.root])
        XCTAssertEqual(next.status, 0, next.err)
        print("cancel of \(count) items answered in \(String(format: "%.2f", cancelled.seconds)) s (CLI wall time, debug build); "
              + "the next command in \(String(format: "%.2f", next.seconds)) s")
        XCTAssertLessThan(next.seconds, 10, "answered within the CLI's own limit, not after it")
        XCTAssertEqual(spool.files(in: "control").filter { !$0.hasPrefix(".") }, [], "nothing left in control/")

        try DirectoryWaiter.waitForFile("big", in: spool.path("failed"), timeout: 60)
        try daemon.waitForStderr(timeout: 30, what: "the group end logged") { $0.contains("msg=\"group ended\"") && $0.contains("request=big") }
        let newLines = daemon.stderrText.split(separator: "\n").dropFirst(linesBefore)
        XCTAssertLessThanOrEqual(newLines.count, 5, "one line for the command, one for the group end:\n" + newLines.joined(separator: "\n"))
        XCTAssertFalse(daemon.stderrText.contains("item failed"), "no line per item")

        let errorBytes = try spool.read("failed", "big.error")
        XCTAssertLessThan(errorBytes.count, 4096, "the .error stays small")
        let error = try json("failed", "big.error")
        XCTAssertNil(error["items"], "not listed in the .error")
        XCTAssertEqual(error["message"] as? String, "\(count) of \(count) items failed")
        let endings = try XCTUnwrap(error["endings"] as? [[String: Any]])
        XCTAssertEqual(endings.count, 1)
        XCTAssertEqual(endings.first?["code"] as? String, "cancelled")
        XCTAssertEqual(endings.first?["count"] as? Int, count)
        XCTAssertEqual(error["itemsFile"] as? String, "big.error.items.jsonl")
        let items = try lines(spool.path("failed", "big.error.items.jsonl"))
        XCTAssertEqual(items.count, count)
        for (i, item) in items.enumerated() {
            XCTAssertEqual(item["index"] as? Int, i)
            XCTAssertEqual(item["url"] as? String, server.url("/f/\(i)"), "each line has its item's URL, read again from the request")
            XCTAssertEqual(item["code"] as? String, "cancelled")
        }

        let marker = try json("final", "big.group.done")
        XCTAssertEqual(marker["failed"] as? Int, count)
        XCTAssertEqual((marker["items"] as? [Any])?.count, 0)
        XCTAssertEqual((marker["endings"] as? [[String: Any]])?.first?["count"] as? Int, count)
        XCTAssertEqual(marker["itemsFile"] as? String, "big.group.done.items.jsonl")
        XCTAssertEqual(try lines(spool.path("final", "big.group.done.items.jsonl")).count, count)
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "the cancel record removed with the group end") {
            !self.spool.files(in: "staging").contains { $0.hasSuffix(".cancelled") }
        }
        XCTAssertEqual(server.allRequests.count, 0, "nothing fetched")
    }

    /// Killed (SIGKILL) after the cancel was answered and before its group ended: the restarted
    /// daemon ends the items cancelled — none is queued or fetched again.
    func testACancelHoldsAcrossAKillBeforeTheGroupEnded() throws {
        let body = TestBody.random(count: 4 << 20, seed: 61)
        server.serve("/first", body: body, script: [.stall(afterBytes: 64 << 10), .normal])
        try spool.drop("big", list { $0 == 0 ? self.server.url("/first") : self.server.url("/f/\($0)") })
        let first = try DaemonProcess.launch(["run", "--spool", spool.root, "--concurrency", "1"])
        defer { first.terminate() }
        try waitForReport("its first item running, the others queued") {
            ($0["running"] as? Int) == 1 && ($0["queued"] as? Int) == self.count - 1
        }
        // The group end cannot be written while the daemon's final folder is gone (the client
        // makes the spool's folders again, but the daemon holds the removed one): it is tried
        // again every 5 s, and the kill comes after the first failure.
        let removed = rmdir(spool.path("final")), reason = String(cString: strerror(errno))
        XCTAssertEqual(removed, 0, "\(reason): \(spool.files(in: "final"))")
        let cancelled = try cli(["cancel", "big", "--spool", spool.root])
        XCTAssertEqual(cancelled.status, 0, cancelled.err)
        try first.waitForStderr(containing: "could not end the group", timeout: 30)
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        XCTAssertEqual(spool.files(in: "failed"), [], "the group had not ended")
        XCTAssertEqual(spool.files(in: "staging").filter { $0.hasSuffix(".cancelled") }.count, 1, "the cancel's one record")
        let fetchedBefore = server.allRequests.count

        let second = try DaemonProcess.launch(["run", "--spool", spool.root, "--concurrency", "1"])
        defer { second.terminate() }
        try DirectoryWaiter.waitForFile("big", in: spool.path("failed"), timeout: 60)
        XCTAssertEqual(server.allRequests.count, fetchedBefore, "nothing fetched after the restart")
        XCTAssertFalse(server.allRequests.contains { $0.path.hasPrefix("/f/") }, "no item the cancel ended was started")
        let error = try json("failed", "big.error")
        let endings = try XCTUnwrap(error["endings"] as? [[String: Any]])
        XCTAssertEqual(endings.map { $0["code"] as? String }, ["cancelled"], "every item ended cancelled")
        XCTAssertEqual(endings.first?["count"] as? Int, count)
        XCTAssertEqual(try lines(spool.path("failed", "big.error.items.jsonl")).count, count)
        XCTAssertFalse(second.stderrText.contains("item failed"), second.stderrText)
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "the cancel record removed with the group end") {
            !self.spool.files(in: "staging").contains { $0.hasSuffix(".cancelled") }
        }
    }
}
