import Foundation
import SpoolTestSupport
import XCTest

/// Cron mode remembers: a drain leaves a record of what it left (`status/last-drain-HOST.json`),
/// and `status` with no daemon shows it — the exit status, the hosts found down with their next
/// probe, each left item's reason — in text, JSON and `--all`, with ids whole on a wide terminal.
final class CronStatusTests: SpoolTestCase {
    private var socket = ""

    override func tearDown() {
        if !socket.isEmpty { _ = try? tmux(["kill-server"]) }
        super.tearDown()
    }

    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 60)
        return (status, p.stdoutText, p.stderrText)
    }

    /// A port nothing listens on, on 127.0.0.1 (a server started and shut down).
    private func closedPort() throws -> Int {
        let gone = try TestHTTPServer.start()
        let port = gone.port
        try gone.shutdown()
        return port
    }

    @discardableResult
    private func tmux(_ arguments: [String]) throws -> String {
        let output = spool.path("tmp", "tmux-output")
        _ = try DetachingTool.run("/usr/bin/tmux", ["-L", socket, "-f", "/dev/null"] + arguments, output: output)
        return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
    }

    /// Runs `spoolfetch ARGS` in a tmux pane `columns` wide (a real terminal: the table form),
    /// waits for it to exit, and returns its screen and exit status.
    private func onTerminal(_ arguments: [String], columns: Int, rows: Int = 80) throws -> (lines: [String], status: Int32) {
        if socket.isEmpty { socket = "spoolfetch-cron-\(getpid())-\(UUID().uuidString.prefix(8))" }
        let tag = UUID().uuidString.prefix(8)
        let script = spool.path("tmp", "status-\(tag).sh"), exit = spool.path("tmp", "status-\(tag).exit")
        let quoted = arguments.map { "'\($0)'" }.joined(separator: " ")
        try """
            '\(DaemonProcess.executablePath)' \(quoted)
            echo $? > '\(exit).tmp' && mv '\(exit).tmp' '\(exit)'
            """.write(toFile: script, atomically: true, encoding: .utf8)
        try tmux(["new-session", "-d", "-s", "s\(tag)", "-x", "\(columns)", "-y", "\(rows)", "exec bash '\(script)'", ";",
                  "set-option", "-t", "s\(tag)", "remain-on-exit", "on"])
        try DirectoryWaiter.waitForFile("status-\(tag).exit", in: spool.path("tmp"), timeout: 60)
        let status = Int32(try String(contentsOfFile: exit, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        let lines = try tmux(["capture-pane", "-p", "-t", "s\(tag)"]).split(separator: "\n").map(String.init)
        return (lines, status)
    }

    func testADueDrainLeftForADownHostIsShownByStatusWithNoDaemon() throws {
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"),
                      "tmux is missing (listed in the Makefile's TEST_PACKAGES)")
        let port = try closedPort()
        let host = "127.0.0.1:\(port)"
        server.serve("/ok", body: Array("ok".utf8))
        // dh2: one item for the down host. w1: 25 items not due; the drain's record lists the next
        // ones due, `status --all` reads the rest from the spool. The long name comes last: its
        // id is read only by --all, after the table's header is printed.
        try spool.drop("dh2", "url: http://\(host)/x\nurl: \(server.url("/ok"))\n")
        try spool.drop("w1", "earliest-start: 2098-01-01T00:00:00Z\n" + (0..<25).map { server.url("/w\($0)") + "\n" }.joined())
        try spool.drop("zz-later-requests", "earliest-start: 2099-01-01T00:00:00Z\nurl: \(server.url("/z"))\n")

        let (drained, log) = try DaemonProcess.drain(spool: spool.root, extra: ["--log-level", "warning"], mode: "--due", timeout: 60)
        XCTAssertEqual(drained, 75, log)
        let records = spool.files(in: "status").filter { $0.hasPrefix("last-drain-") }
        XCTAssertEqual(records.count, 1, "the drain leaves one record: \(spool.files(in: "status"))")

        // JSON: the record, labelled as the last drain's, and the item's reason.
        let json = try cli(["status", "--json", "--spool", spool.root])
        XCTAssertEqual(json.status, 1, "no daemon runs: \(json.err)")
        XCTAssertTrue(json.err.contains("no daemon is running"), json.err)
        XCTAssertTrue(json.err.contains("last drain at ") && json.err.contains("exit 75: items left for unreachable hosts"), json.err)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any], json.out)
        XCTAssertEqual((object["daemons"] as? [Any])?.count, 0)
        let drain = try XCTUnwrap((object["lastDrains"] as? [[String: Any]])?.first, json.out)
        XCTAssertEqual(drain["exitStatus"] as? Int, 75)
        XCTAssertEqual(drain["mode"] as? String, "due")
        XCTAssertEqual(drain["published"] as? Int, 1)
        XCTAssertEqual(drain["leftForHosts"] as? Int, 1)
        XCTAssertNotNil(drain["endedAt"] as? String)
        let down = try XCTUnwrap((drain["unreachableHosts"] as? [[String: Any]])?.first, "\(drain)")
        XCTAssertEqual(down["host"] as? String, host)
        let nextProbe = try XCTUnwrap(down["nextProbe"] as? String)
        XCTAssertNotNil(RFC3339Check.parse(nextProbe), nextProbe)
        XCTAssertFalse((down["lastError"] as? String ?? "").isEmpty, "\(down)")
        let tasks = try XCTUnwrap(object["tasks"] as? [[String: Any]])
        let item = try XCTUnwrap(tasks.first { $0["id"] as? String == "dh2#0" }, json.out)
        XCTAssertEqual(item["state"] as? String, "pending")
        let reason = item["waitingFor"] as? String ?? ""
        XCTAssertTrue(reason.contains("host \(host) unreachable since") && reason.contains("next probe \(nextProbe)"), reason)
        XCTAssertFalse(tasks.contains { $0["id"] as? String == "dh2#1" }, "published: not left")

        // Plain lines (piped): the label on stderr, the item's reason in its line.
        let plain = try cli(["status", "--spool", spool.root])
        XCTAssertEqual(plain.status, 1)
        XCTAssertTrue(plain.err.contains("exit 75"), plain.err)
        let line = try XCTUnwrap(plain.out.split(separator: "\n").first { $0.hasPrefix("dh2#0\tpending\t") }, plain.out)
        XCTAssertTrue(line.contains(host), String(line))

        // --all --json: the record once, every waiting item once.
        let all = try cli(["status", "--all", "--json", "--spool", spool.root])
        XCTAssertEqual(all.status, 1, all.err)
        let allObject = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(all.out.utf8)) as? [String: Any], all.out)
        XCTAssertEqual((allObject["lastDrains"] as? [Any])?.count, 1)
        let allIDs = (allObject["tasks"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        XCTAssertEqual(allIDs.count, Set(allIDs).count, "each listed once: \(allIDs)")
        XCTAssertEqual(Set(allIDs), Set(["dh2#0", "zz-later-requests#0"] + (0..<25).map { "w1#\($0)" }), "\(allIDs)")

        // On a wide terminal: the drain's lines, and every id whole, streamed ones too.
        let wide = try onTerminal(["status", "--all", "--spool", spool.root], columns: 120)
        let screen = wide.lines.joined(separator: "\n")
        XCTAssertEqual(wide.status, 1, screen)
        XCTAssertTrue(wide.lines.contains { $0.hasPrefix("last drain at ") && $0.contains("exit 75") }, screen)
        XCTAssertTrue(wide.lines.contains { $0.contains("host \(host) unreachable since") && $0.contains("next probe \(nextProbe)") }, screen)
        for id in ["dh2#0", "w1#0", "w1#24", "zz-later-requests#0"] {
            XCTAssertTrue(wide.lines.contains { $0.hasPrefix(id + " ") }, "\(id) whole at 120 columns:\n\(screen)")
        }
        let dh2 = try XCTUnwrap(wide.lines.first { $0.hasPrefix("dh2#0 ") }, screen)
        XCTAssertTrue(dh2.contains("pending") && dh2.contains("host \(host)"), dh2)
        // (tmux's "Pane is dead" line, under a pane that remains on exit, is not a row.)
        let rows = wide.lines.drop { !$0.hasPrefix("ID ") }.dropFirst().filter { !$0.hasPrefix("Pane is dead") }
        XCTAssertEqual(rows.count, 27, screen)
        XCTAssertFalse(rows.contains { $0.prefix { $0 != " " }.contains("…") }, "no id cut at 120 columns:\n\(screen)")

        // Narrow: the long id is shortened in the middle as with a daemon, the short ones stay whole.
        let narrow = try onTerminal(["status", "--all", "--spool", spool.root], columns: 40)
        let narrowScreen = narrow.lines.joined(separator: "\n")
        XCTAssertTrue(narrow.lines.contains { $0.hasPrefix("dh2#0 ") }, narrowScreen)
        XCTAssertTrue(narrow.lines.contains { $0.hasPrefix("zz-") && $0.split(separator: " ")[0].contains("…")
                                               && $0.split(separator: " ")[0].hasSuffix("s#0") }, narrowScreen)

        // The next run supersedes the record: while it runs, its live report speaks.
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "the record gone") {
            !self.spool.files(in: "status").contains { $0.hasPrefix("last-drain-") }
        }

        // A daemon stopped (not a drain): no record, no report; every row of --all is read from
        // the spool after the header, and still printed whole (before: `d…`, `w…`, `zz…#0`).
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 60), 0, daemon.stderrText)
        XCTAssertEqual(spool.files(in: "status").filter { $0.hasSuffix(".json") }, [], "a stopped daemon leaves no record")
        let bare = try onTerminal(["status", "--all", "--spool", spool.root], columns: 120)
        let bareScreen = bare.lines.joined(separator: "\n")
        XCTAssertEqual(bare.status, 1, bareScreen)
        XCTAssertFalse(bareScreen.contains("last drain"), bareScreen)
        for id in ["dh2#0", "w1#0", "w1#24", "zz-later-requests#0"] {
            XCTAssertTrue(bare.lines.contains { $0.hasPrefix(id + " ") }, "\(id) whole at 120 columns:\n\(bareScreen)")
        }
    }
}

/// RFC 3339 as the daemon writes it, to check a time is one.
private enum RFC3339Check {
    static func parse(_ text: String) -> Date? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: text) { return d }
        f.formatOptions = [.withInternetDateTime]
        return f.date(from: text)
    }
}
