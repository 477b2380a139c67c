import Foundation
import SpoolTestSupport
import XCTest

/// Every ending says why: an item a deadline or a cancel ended carries its `cause` (what it waited
/// on or last failed with: code, host, HTTP status or curl code, attempts, the state it was in)
/// in `failed/R.error`, in the group marker, in `events --json` and in the item hook's
/// environment. A down host and a 500 after several attempts no longer read the same.
final class EndingCauseTests: SpoolTestCase {
    private func items(_ folder: String, _ name: String) throws -> [[String: Any]] {
        try XCTUnwrap(json(folder, name)["items"] as? [[String: Any]], "\(folder)/\(name) lists its items")
    }

    private func cause(_ item: [String: Any]?, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(item?["cause"] as? [String: Any], "a cause in \(String(describing: item))", file: file, line: line)
    }

    /// The item events `events --json` prints for the spool.
    private func itemEvents() throws -> [[String: Any]] {
        let events = try DaemonProcess.launch(["events", "--json", "--spool", spool.root])
        XCTAssertEqual(try events.waitForExit(timeout: 30), 0, events.stderrText)
        return events.stdoutText.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["event"] as? String == "item" }
    }

    /// The item hook writes what the cause variables held, one line per ended item.
    private func hook(_ log: String) -> String {
        "echo \"$SPOOLFETCH_ID|$SPOOLFETCH_STATUS|${SPOOLFETCH_CAUSE_CODE-unset}|${SPOOLFETCH_CAUSE_HOST-unset}\" >> '\(log)'"
    }

    private func hookLines(_ log: String) throws -> [String] {
        try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init).sorted()
    }

    func testADownHostCutByADeadlineNamesTheHostAndItsCurlError() throws {
        let down = try RefusingPort()
        server.serve("/ok", body: Array("ok".utf8))
        try spool.drop("nightly", "deadline: 2s\nurl: http://127.0.0.1:\(down.port)/x\nurl: http://127.0.0.1:\(down.port)/y\nurl: \(server.url("/ok"))\n")
        let log = spool.path("tmp", "hooks.log")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--on-item", hook(log)], timeout: 60)
        XCTAssertEqual(status, 1, stderr)

        let failed = try items("failed", "nightly.error")
        XCTAssertEqual(failed.map { $0["index"] as? Int }, [0, 1])
        for item in failed {
            XCTAssertEqual(item["code"] as? String, "deadline", "\(item)")
            let cause = try cause(item)
            XCTAssertEqual(cause["code"] as? String, "host-unreachable", "\(cause)")
            XCTAssertEqual(cause["host"] as? String, "127.0.0.1:\(down.port)", "\(cause)")
            XCTAssertEqual(cause["curlCode"] as? Int, 7, "connection refused is curl's 7, for the item that probed and the one behind it: \(cause)")
            XCTAssertEqual(cause["attempts"] as? Int, 0, "an outage spends no attempt: \(cause)")
            XCTAssertTrue(["pending", "running"].contains(cause["waitingFor"] as? String ?? ""), "behind the host's probe, or its probe: \(cause)")
            let message = try XCTUnwrap(cause["message"] as? String)
            XCTAssertTrue(message.contains("127.0.0.1:\(down.port) unreachable since") && message.contains("curl error 7"), message)
        }
        let group = try items("final", "nightly.group.done").filter { $0["outcome"] as? String == "failed" }
        XCTAssertEqual(try group.map { try cause($0) as NSDictionary }, try failed.map { try cause($0) as NSDictionary },
                       "the group marker's items carry the same causes as the error file")
        let events = try itemEvents().filter { $0["outcome"] as? String == "failed" }
        XCTAssertEqual(events.count, 2)
        let text = try DaemonProcess.launch(["events", "--spool", spool.root])
        XCTAssertEqual(try text.waitForExit(timeout: 30), 0, text.stderrText)
        XCTAssertTrue(text.stdoutText.contains("deadline: its deadline passed before it ended (cause host-unreachable: host 127.0.0.1:\(down.port) unreachable since"), text.stdoutText)
        XCTAssertEqual(try events.map { try cause($0) as NSDictionary }, try failed.map { try cause($0) as NSDictionary },
                       "events --json carries them too")
        XCTAssertEqual(try hookLines(log), ["nightly#0|failed|host-unreachable|127.0.0.1:\(down.port)",
                                            "nightly#1|failed|host-unreachable|127.0.0.1:\(down.port)",
                                            "nightly#2|published|unset|unset"])
    }

    func testA500AfterSeveralAttemptsCutByADeadlineNamesTheStatusAndTheAttempts() throws {
        server.serve("/broken", body: Array("never".utf8), script: [.status(500)])
        try spool.drop("broken", "deadline: 3s\nurl: \(server.url("/broken"))\n")
        let log = spool.path("tmp", "hooks.log")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--on-item", hook(log), "--max-attempts", "0", "--retry-base", "0.2", "--retry-cap", "0.4"], timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        let item = try XCTUnwrap(try items("failed", "broken.error").first)
        XCTAssertEqual(item["code"] as? String, "deadline")
        let cause = try cause(item)
        let asked = server.requests(for: "/broken").count
        XCTAssertGreaterThanOrEqual(asked, 3, "retried within the deadline")
        XCTAssertEqual(cause["code"] as? String, "http-status", "\(cause)")
        XCTAssertEqual(cause["httpStatus"] as? Int, 500, "\(cause)")
        XCTAssertEqual(cause["host"] as? String, "127.0.0.1:\(server.port)", "\(cause)")
        XCTAssertNil(cause["curlCode"], "a response came: \(cause)")
        let attempts = try XCTUnwrap(cause["attempts"] as? Int)
        XCTAssertTrue(attempts == asked || attempts == asked + 1, "attempts \(attempts) for \(asked) requests (one may have been running)")
        XCTAssertTrue(["retrying", "running"].contains(cause["waitingFor"] as? String ?? ""), "\(cause)")
        XCTAssertTrue((cause["message"] as? String ?? "").contains("HTTP status 500"), "\(cause)")
        let group = try XCTUnwrap(try items("final", "broken.group.done").first)
        XCTAssertEqual(try self.cause(group) as NSDictionary, cause as NSDictionary)
        XCTAssertEqual(try itemEvents().compactMap { $0["cause"] as? [String: Any] }.map { $0 as NSDictionary }, [cause as NSDictionary])
        XCTAssertEqual(try hookLines(log), ["broken#0|failed|http-status|127.0.0.1:\(server.port)"])
    }

    func testACancelOfAWaitingItemNamesWhatItWaitedFor() throws {
        server.serve("/later", body: Array("later".utf8))
        let later = rfc3339(Date().addingTimeInterval(3600))
        try spool.drop("later", "earliest-start: \(later)\nurl: \(server.url("/later"))\n")
        let log = spool.path("tmp", "hooks.log")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--on-item", hook(log)])
        defer { daemon.terminate() }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 60, what: "later#0 waiting-start in status") {
            guard let p = try? DaemonProcess.launch(["status", "--json", "--spool", spool.root]),
                  (try? p.waitForExit(timeout: 30)) == 0,
                  let object = try? JSONSerialization.jsonObject(with: Data(p.stdoutText.utf8)) as? [String: Any]
            else { return false }
            return (object["tasks"] as? [[String: Any]])?.contains {
                $0["id"] as? String == "later#0" && $0["state"] as? String == "waiting-start"
            } ?? false
        }
        let cancel = try DaemonProcess.launch(["cancel", "later", "--spool", spool.root])
        XCTAssertEqual(try cancel.waitForExit(timeout: 30), 0, cancel.stderrText)
        try DirectoryWaiter.waitForFile("later.error", in: spool.path("failed"), timeout: 60)
        let item = try XCTUnwrap(try items("failed", "later.error").first)
        XCTAssertEqual(item["code"] as? String, "cancelled")
        let cause = try cause(item)
        XCTAssertEqual(cause["code"] as? String, "waiting-start", "\(cause)")
        XCTAssertEqual(cause["waitingFor"] as? String, "waiting-start", "\(cause)")
        XCTAssertEqual(cause["host"] as? String, "127.0.0.1:\(server.port)", "\(cause)")
        XCTAssertEqual(cause["attempts"] as? Int, 0)
        XCTAssertTrue((cause["message"] as? String ?? "").contains(String(later.dropLast())), "the message names its earliest start: \(cause)")
        XCTAssertEqual(server.requests(for: "/later").count, 0)
        try DirectoryWaiter.waitForFile("later.group.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(try self.cause(try items("final", "later.group.done").first) as NSDictionary, cause as NSDictionary)
        XCTAssertEqual(try itemEvents().compactMap { $0["cause"] as? [String: Any] }.map { $0 as NSDictionary }, [cause as NSDictionary])
        try DirectoryWaiter.wait(in: spool.path("tmp"), timeout: 30, what: "the item hook ran") {
            (try? self.hookLines(log)) == ["later#0|failed|waiting-start|127.0.0.1:\(self.server.port)"]
        }
    }

    /// Cron mode: a drain (`run --due`) left an item behind a down host and exited 75; `cancel`
    /// with no daemon files it, and its cause is the host the drain's record found down.
    func testACancelWithoutADaemonTakesItsCauseFromTheLastDrainsRecord() throws {
        let down = try RefusingPort()
        try spool.drop("behind", "url: http://127.0.0.1:\(down.port)/x\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, mode: "--due", timeout: 60)
        XCTAssertEqual(status, 75, stderr)
        XCTAssertEqual(spool.claimed(), ["behind"], "left claimed by the drain's (now dead) worker")
        let cancel = try DaemonProcess.launch(["cancel", "behind", "--spool", spool.root])
        XCTAssertEqual(try cancel.waitForExit(timeout: 30), 0, cancel.stderrText)
        let item = try XCTUnwrap(try items("failed", "behind.error").first)
        XCTAssertEqual(item["code"] as? String, "cancelled")
        let cause = try cause(item)
        XCTAssertEqual(cause["code"] as? String, "host-unreachable", "\(cause)")
        XCTAssertEqual(cause["host"] as? String, "127.0.0.1:\(down.port)")
        XCTAssertTrue((cause["message"] as? String ?? "").contains("last drain"), "\(cause)")
        XCTAssertEqual(try self.cause(try items("final", "behind.group.done").first) as NSDictionary, cause as NSDictionary)
    }
}
