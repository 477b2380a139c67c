import Foundation
import SpoolTestSupport
import XCTest

/// Batches of the size batch tools emit: lists of 100,000 URLs, many waiting requests.
final class LargeBatchTests: SpoolTestCase {
    /// The daemon's own report, once `predicate` holds for it.
    private func waitForReport(timeout: Double, what: String,
                               until predicate: @escaping ([String: Any]) -> Bool) throws -> [String: Any] {
        var found: [String: Any]?
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: timeout, what: what) {
            for name in self.spool.files(in: "status") where name.hasSuffix(".json") {
                guard let bytes = try? self.spool.read("status", name),
                      let report = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                      let daemon = report["daemon"] as? [String: Any], predicate(daemon) else { continue }
                found = daemon
                return true
            }
            return false
        }
        return try XCTUnwrap(found)
    }

    func testAHundredThousandURLListIsAcceptedAndEveryItemQueued() throws {
        let count = 100_000
        var text = "earliest-start: 2030-01-01T00:00:00Z\n"
        text.reserveCapacity(count * 48)
        for i in 0..<count { text += "http://127.0.0.1:9/batch/file-\(i).dat\n" }
        XCTAssertGreaterThan(text.utf8.count, 3 << 20, "a list far larger than the old 64 KiB limit")
        try spool.drop("huge", text)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        let started = Date()
        let report = try waitForReport(timeout: 300, what: "100,000 items queued") { ($0["queued"] as? Int ?? 0) >= count }
        print("100,000-URL list: queued after \(String(format: "%.1f", Date().timeIntervalSince(started))) s (debug build)")
        XCTAssertEqual(report["queued"] as? Int, count)
        let states = try XCTUnwrap(report["states"] as? [String: Int])
        XCTAssertEqual(states["waiting-start"], count)
        XCTAssertEqual(spool.files(in: "rejected"), [], daemon.stderrText)
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 60), 0, daemon.stderrText)
    }

    func testADueRequestDroppedBehindManyWaitingOnesIsPublishedPromptly() throws {
        server.serve("/due", body: Array("due".utf8))
        let later = rfc3339(Date().addingTimeInterval(3600))
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)
        for i in 0..<300 { try spool.drop("later\(i)", "url: \(server.url("/later\(i)"))\nearliest-start: \(later)\n") }
        try spool.drop("now", "url: \(server.url("/due"))\n")
        let dropped = Date()
        try DirectoryWaiter.waitForFile("now.group.done", in: spool.path("final"), timeout: 30)
        // The request file itself moves into done/ right after its group marker: the last step.
        try DirectoryWaiter.waitForFile("now", in: spool.path("done"), timeout: 30)
        print("due request behind 300 waiting ones: published \(String(format: "%.2f", Date().timeIntervalSince(dropped))) s after its drop")
        XCTAssertEqual(spool.files(in: "incoming"), [], "every request was claimed on arrival")
        XCTAssertEqual(spool.claimed().count, 300, "the waiting ones stay claimed")
        XCTAssertTrue(server.allRequests.allSatisfy { $0.path == "/due" })
    }

    func testKillNineOfAWorkerHoldingManyClaimsAnotherAdoptsAllAndPublishesEachOnce() throws {
        let count = 300
        for i in 0..<count { server.serve("/k\(i)", body: Array("k\(i)".utf8)) }
        // Due a few seconds from now: the first worker claims them all and fetches none.
        let soon = Date().addingTimeInterval(6)
        for i in 0..<count {
            try spool.drop("req\(i)", "url: \(server.url("/k\(i)"))\nearliest-start: \(rfc3339(soon))\n")
        }
        let first = try DaemonProcess.launch(["run", "--spool", spool.root])
        try DirectoryWaiter.wait(in: spool.path("incoming"), timeout: 60, what: "every request claimed") {
            self.spool.files(in: "incoming").isEmpty && self.spool.claimed().count == count
        }
        first.signal(SIGKILL)
        _ = try first.waitForExit(timeout: 10)
        XCTAssertTrue(server.allRequests.isEmpty)

        let second = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { second.terminate() }
        // A request file moves into done/ after its group marker in final/: its group's last step.
        try DirectoryWaiter.wait(in: spool.path("done"), timeout: 120, what: "every group ended") {
            let done = Set(self.spool.files(in: "done"))
            return (0..<count).allSatisfy { done.contains("req\($0)") }
        }
        let final = Set(spool.files(in: "final"))
        XCTAssertTrue((0..<count).allSatisfy { final.contains("req\($0).group.done") }, "every group marker is in final/")
        XCTAssertTrue(second.stderrText.contains("adopting"), second.stderrText)
        for i in 0..<count {
            XCTAssertEqual(server.requests(for: "/k\(i)").count, 1, "k\(i) fetched once")
            XCTAssertEqual(try spool.read("final", "k\(i)"), Array("k\(i)".utf8))
        }
        XCTAssertFalse(spool.files(in: "final").contains { $0.hasSuffix("-1") }, "nothing published twice")
        XCTAssertEqual(spool.claimed(), [])
    }
}
