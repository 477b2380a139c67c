import Foundation
import SpoolTestSupport
import XCTest

/// `status` lists the next 20 due; `status --all` lists every waiting item, read from the spool,
/// in the same three forms (plain lines, a table, JSON written as it goes).
final class StatusAllTests: SpoolTestCase {
    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 60)
        return (status, p.stdoutText, p.stderrText)
    }

    /// The ids of the plain output's task lines (after the header).
    private func plainIDs(_ out: String) -> [String] {
        out.split(separator: "\n").dropFirst().map { String($0.split(separator: "\t", omittingEmptySubsequences: false)[0]) }
    }

    func testAllListsEveryWaitingItemOnceAndNotTheEndedOnes() throws {
        server.serve("/now", body: TestBody.random(count: 4_000, seed: 81))
        let final = spool.path("final")
        // "mixed": item 0 is due and gets published; item 1 waits an hour. "list": 30 waiting.
        try spool.drop("mixed", "url: \(server.url("/now"))\nurl: \(server.url("/later-0"))\nearliest-start: \(rfc3339(Date().addingTimeInterval(3600)))\n")
        try spool.drop("list", "earliest-start: \(rfc3339(Date().addingTimeInterval(3600)))\n"
                       + (0..<30).map { server.url("/list-\($0)") + "\n" }.joined())
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try DirectoryWaiter.waitForFile("now.done", in: final, timeout: 30)
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "31 queued in the report") {
            (try? self.cli(["status", "--json", "--spool", self.spool.root]).out.contains("\"queued\":31")) ?? false
        }

        // Without --all: the next 20 due, and the count of the rest.
        let short = try cli(["status", "--spool", spool.root])
        XCTAssertEqual(short.status, 0, short.err)
        let shortIDs = plainIDs(short.out).filter { $0.hasPrefix("list#") || $0 == "mixed#1" }
        XCTAssertEqual(shortIDs.count, 20, short.out)

        let all = try cli(["status", "--all", "--spool", spool.root])
        XCTAssertEqual(all.status, 0, all.err)
        XCTAssertTrue(all.out.hasPrefix("ID\tSTATE\t"), all.out)
        let ids = plainIDs(all.out)
        let waiting = ids.filter { $0.hasPrefix("list#") || $0 == "mixed#1" }
        XCTAssertEqual(waiting.count, 31, all.out)
        XCTAssertEqual(Set(waiting).count, 31, "each listed once: \(all.out)")
        XCTAssertEqual(ids.filter { $0 == "mixed#0" }.count, 1, "the ended item only as the report has it: \(all.out)")

        let json = try cli(["status", "--all", "--json", "--spool", spool.root])
        XCTAssertEqual(json.status, 0, json.err)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any], json.out)
        let tasks = try XCTUnwrap(object["tasks"] as? [[String: Any]])
        let states = Dictionary(grouping: tasks, by: { $0["id"] as? String ?? "" })
        XCTAssertEqual(states.keys.filter { $0.hasPrefix("list#") }.count, 30)
        XCTAssertEqual(states["list#29"]?.first?["state"] as? String, "waiting-start")
        XCTAssertNotNil(states["list#29"]?.first?["startsAt"] as? String)
        XCTAssertEqual((object["daemons"] as? [Any])?.count, 1)

        // With no daemon the spool still says what waits: item 1 of "mixed", never item 0, whose
        // publication its batch journal records.
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 60), 0, daemon.stderrText)
        let stopped = try cli(["status", "--all", "--spool", spool.root])
        XCTAssertEqual(stopped.status, 1, "no daemon runs: \(stopped.err)")
        let left = plainIDs(stopped.out)
        XCTAssertEqual(left.filter { $0.hasPrefix("list#") }.count, 30, stopped.out)
        XCTAssertTrue(left.contains("mixed#1"), stopped.out)
        XCTAssertFalse(left.contains("mixed#0"), "published: not waiting\n\(stopped.out)")
    }
}
