import Foundation
import SpoolTestSupport
import XCTest

/// Cron mode: with no daemon running, `cancel R` of a request a dead worker left in `active/W/`
/// files it as cancelled (its published items stay published) — and never takes a request from
/// a worker that is alive.
final class CronCancelTests: SpoolTestCase {
    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText)
    }

    func testCancelWithoutADaemonFilesADeadWorkersRequestAsCancelledAndLeavesALiveOnesAlone() throws {
        let first = TestBody.random(count: 20_000, seed: 4911)
        server.serve("/first", body: first)
        server.serve("/stalled", body: TestBody.random(count: 200_000, seed: 4912), script: [.stall(afterBytes: 1_000)])
        try spool.drop("nightly", """
            url: \(server.url("/first"))
            name: first.bin
            url: \(server.url("/stalled"))
            name: stalled.bin

            """)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try DirectoryWaiter.waitForFile("first.bin.done", in: spool.path("final"), timeout: 30)
        // The daemon's own report says the second item is running (its part may be unnamed, so
        // staging/ need not show it).
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "nightly#1 running in the status report") {
            self.spool.files(in: "status").contains { file in
                guard file.hasSuffix(".json"), let bytes = try? self.spool.read("status", file),
                      let report = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return false }
                return (report["tasks"] as? [[String: Any]] ?? []).contains {
                    $0["id"] as? String == "nightly#1" && $0["state"] as? String == "running"
                }
            }
        }

        // Alive but silent (stopped, its status report gone): the request is not taken from it.
        daemon.signal(SIGSTOP)
        for name in spool.files(in: "status") { unlink(spool.path("status", name)) }
        let live = try cli(["cancel", "nightly", "--spool", spool.root])
        XCTAssertNotEqual(live.status, 0, live.out + live.err)
        XCTAssertTrue(live.err.contains("still alive"), live.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("failed", "nightly")))
        XCTAssertEqual(spool.claimed(), ["nightly"], "the live worker keeps its request")

        daemon.signal(SIGKILL)
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 128 + SIGKILL)
        let r = try cli(["cancel", "nightly", "--spool", spool.root])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertTrue((r.out + r.err).contains("cancelled 1 item(s) of nightly"), r.out + r.err)

        let record = try json("failed", "nightly.error")
        let items = try XCTUnwrap(record["items"] as? [[String: Any]], "\(record)")
        XCTAssertEqual(items.count, 1, "\(record)")
        XCTAssertEqual(items.first?["index"] as? Int, 1)
        XCTAssertEqual(items.first?["code"] as? String, "cancelled")
        XCTAssertEqual(try spool.read("final", "first.bin"), first, "the published item stays published")
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool.path("final", "first.bin.done")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("final", "stalled.bin")))
        let group = try json("final", "nightly.group.done")
        XCTAssertEqual(group["published"] as? Int, 1, "\(group)")
        XCTAssertEqual(group["failed"] as? Int, 1, "\(group)")
        XCTAssertEqual(spool.claimed(), [], "nothing is left claimed")

        // It has ended: a second cancel says so, and status --all no longer lists it as held.
        let again = try cli(["cancel", "nightly", "--spool", spool.root])
        XCTAssertNotEqual(again.status, 0)
        XCTAssertTrue(again.err.contains("nightly is failed"), again.err)
        let all = try cli(["status", "--all", "--spool", spool.root])
        XCTAssertFalse(all.out.contains("running") || all.out.contains("queued"), all.out)
    }

    /// A dead worker's request of many waiting items, cancelled with no daemon running: its
    /// `.error` and group marker count them and list them in their items files, as a daemon's do.
    func testCancelWithoutADaemonOfALargeRequestCountsItsItems() throws {
        let count = 1500
        var text = "earliest-start: \(rfc3339(Date().addingTimeInterval(3600)))\n"
        for i in 0..<count { text += server.url("/w/\(i)") + "\n" }
        try spool.drop("many", text)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 60, what: "every item queued") {
            self.spool.files(in: "status").contains { file in
                guard file.hasSuffix(".json"), let bytes = try? self.spool.read("status", file),
                      let report = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return false }
                return ((report["daemon"] as? [String: Any])?["queued"] as? Int) == count
            }
        }
        daemon.signal(SIGKILL)
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 128 + SIGKILL)
        let r = try cli(["cancel", "many", "--spool", spool.root])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertTrue(r.out.contains("cancelled \(count) item(s) of many"), r.out)
        let record = try json("failed", "many.error")
        XCTAssertNil(record["items"])
        XCTAssertEqual((record["endings"] as? [[String: Any]])?.first?["count"] as? Int, count)
        let listed = try String(contentsOfFile: spool.path("failed", "many.error.items.jsonl"), encoding: .utf8)
            .split(separator: "\n")
        XCTAssertEqual(listed.count, count)
        XCTAssertTrue(listed.last?.contains("\"url\":\"\(server.url("/w/\(count - 1)"))\"") ?? false, "\(listed.last ?? "")")
        let marker = try json("final", "many.group.done")
        XCTAssertEqual(marker["failed"] as? Int, count)
        XCTAssertEqual(marker["itemsFile"] as? String, "many.group.done.items.jsonl")
        // Its retry reads the items file: every cancelled item is queued again, and one by its id.
        let one = try cli(["retry", "many#7", "--spool", spool.root])
        XCTAssertEqual(one.status, 0, one.out + one.err)
        let retried = try cli(["retry", "many", "--spool", spool.root])
        XCTAssertEqual(retried.status, 0, retried.out + retried.err)
        XCTAssertTrue(retried.out.contains("queued \(count - 1) failed item(s) of many again"), retried.out)
        let queued = spool.files(in: "incoming").filter { $0.hasPrefix("many-retry") }
        XCTAssertEqual(queued.count, 2, "\(queued)")
        let urls = try queued.flatMap { name in
            try String(decoding: spool.read("incoming", name), as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("http") }
        }
        XCTAssertEqual(urls.count, count, "every item queued once: the one retried by its id, the others with the request")
        XCTAssertEqual(Set(urls).count, count)
    }
}
