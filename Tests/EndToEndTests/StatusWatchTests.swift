import Foundation
import SpoolTestSupport
import XCTest

/// `status --watch` on a real terminal: tmux runs it in a pseudo-terminal of a given size, and
/// the test reads the screen (`capture-pane`) and the pane's state (`display -p`).
final class StatusWatchTests: SpoolTestCase {
    private var socket = ""

    override func tearDown() {
        if !socket.isEmpty { _ = try? tmux(["kill-server"]) }
        super.tearDown()
    }

    /// Runs tmux on this test's own server; its output. The server that `new-session` starts
    /// stays behind (see `DetachingTool`).
    @discardableResult
    private func tmux(_ arguments: [String]) throws -> String {
        let output = spool.path("tmp", "tmux-output")
        _ = try DetachingTool.run("/usr/bin/tmux", ["-L", socket, "-f", "/dev/null"] + arguments, output: output)
        return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
    }

    private func screen() throws -> [String] {
        // One line per row of the pane, each ended by a newline.
        var lines = try tmux(["capture-pane", "-p", "-t", "w"]).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    private func pane(_ format: String) throws -> String {
        try tmux(["display", "-p", "-t", "w", format]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Polls the pane (it has no file to watch) until `predicate` holds, with a deadline.
    private func waitForScreen(_ what: String, timeout: Double = 30, until predicate: ([String]) -> Bool) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        var last: [String] = []
        while Date() < deadline {
            last = try screen()
            if predicate(last) { return last }
            usleep(100_000)
        }
        XCTFail("timed out waiting for \(what); the screen:\n\(last.joined(separator: "\n"))")
        throw WaitError.timedOut(what: what, after: timeout)
    }

    func testWatchRedrawsInPlaceFitsTheWindowAndRestoresTheTerminal() throws {
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"),
                      "tmux is missing (listed in the Makefile's TEST_PACKAGES)")
        // 40 × 4 MiB at 1 MiB/s, 4 at a time: 36 wait. Half of them say their size.
        let size = 4 << 20
        for i in 0..<40 { server.serve("/w\(i)", body: TestBody.random(count: size, seed: UInt64(500 + i))) }
        // Named as `add` names requests: ids of 30 characters and more.
        let realistic = "add-20261128T073115Z-15812-1"
        try spool.drop(realistic, "expected-bytes: 4M\n" + (0..<20).map { server.url("/w\($0)") + "\n" }.joined())
        try spool.drop("add-20261128T073115Z-15812-2", (20..<40).map { server.url("/w\($0)") + "\n" }.joined())
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--max-rate", "1M", "--concurrency", "4",
                                               "--per-host", "4", "--log-level", "warning"])
        defer { daemon.terminate() }

        socket = "spoolfetch-test-\(getpid())-\(UUID().uuidString.prefix(8))"
        // bash runs it and writes its exit status (bash outlives a Ctrl-C its child handled): tmux
        // 3.3 does not always reap a pane's process, so the pane cannot be asked for it.
        let script = spool.path("tmp", "watch.sh"), exit = spool.path("tmp", "watch.exit")
        try """
            '\(DaemonProcess.executablePath)' status --watch --spool '\(spool.root)'
            echo $? > '\(exit).tmp' && mv '\(exit).tmp' '\(exit)'
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let command = "exec bash '\(script)'"
        let raw = spool.path("tmp", "pane-output")
        try tmux(["new-session", "-d", "-s", "w", "-x", "110", "-y", "30", command, ";",
                  "set-option", "-t", "w", "remain-on-exit", "on", ";", "pipe-pane", "-t", "w", "cat > '\(raw)'"])

        // 110 × 30: the daemon lines and the header on top, rows cut to fit, "… and N more" last.
        var lines = try waitForScreen("4 running and the ETA with unknown sizes") { lines in
            lines.contains { $0.contains("4 running") } && lines.contains { $0.contains("of unknown size") }
                && lines.contains { $0.hasPrefix("… and ") }
        }
        XCTAssertEqual(try pane("#{alternate_on}"), "1", "drawn on the alternate screen")
        XCTAssertEqual(try pane("#{history_size}"), "0", "nothing scrolled into the scrollback")
        XCTAssertTrue(lines[0].hasPrefix("daemon "), lines.joined(separator: "\n"))
        XCTAssertTrue(lines.contains { $0.hasPrefix("ID ") && $0.contains("STATE") }, "the header stays")
        let filled = lines.filter { !$0.isEmpty }
        XCTAssertLessThanOrEqual(filled.count, 30)
        XCTAssertTrue(lines.allSatisfy { $0.count <= 110 })
        let rows = filled.filter { $0.hasPrefix("add-") }.count
        let more = try XCTUnwrap(Int(try XCTUnwrap(filled.last).split(separator: " ")[2]), filled.last ?? "")
        XCTAssertEqual(rows + more, 40, "every item is a row or counted in the last line\n\(lines.joined(separator: "\n"))")
        // The ETA counts what is still to come (the 20 sized items: about 80 MiB at 1 MiB/s), not
        // just the 4 running, and says the other 20 have no size.
        let etaLine = try XCTUnwrap(lines.first { $0.contains("ETA") })
        let unknown = try XCTUnwrap(etaLine.components(separatedBy: " + ").last?.split(separator: " ").first.flatMap { Int($0) },
                                    etaLine)
        XCTAssertTrue((16...20).contains(unknown) && etaLine.contains("of unknown size"),
                      "the unsized items not running yet (a running one's size is its Content-Length): \(etaLine)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("add-20261128T073115Z-15812-2#0 ") }, "ids whole at 110:\n\(lines.joined(separator: "\n"))")
        let eta = try XCTUnwrap(etaLine.components(separatedBy: "ETA ").last?.split(separator: " ").first.map(String.init))
        XCTAssertTrue(eta.contains("m"), "an ETA in minutes, not seconds: \(etaLine)")

        // A smaller window (SIGWINCH): the next frame fits it at once.
        try tmux(["resize-window", "-t", "w", "-x", "80", "-y", "12"])
        lines = try waitForScreen("a frame of 80 × 12", timeout: 5) { lines in
            lines.count <= 12 && (lines.last { !$0.isEmpty }?.hasPrefix("… and ") ?? false)
                && lines.first?.hasPrefix("daemon ") == true
        }
        XCTAssertTrue(lines.allSatisfy { $0.count <= 80 }, lines.joined(separator: "\n"))
        XCTAssertEqual(try pane("#{history_size}"), "0")

        // 120 × 40, 80 × 24 and 60 × 12: the header stays under the daemon's lines, every row is
        // one line within the width (an id too long is shortened in the middle), nothing scrolls.
        var previous = lines.filter { !$0.isEmpty }.count
        for (columns, height) in [(120, 40), (80, 24), (60, 12)] {
            try tmux(["resize-window", "-t", "w", "-x", "\(columns)", "-y", "\(height)"])
            lines = try waitForScreen("a frame of \(columns) × \(height)", timeout: 5) { lines in
                // A frame of the new size, not the old one as tmux cut or kept it: filled to the
                // last row, or (a report lists at most 24 tasks here) taller than the last frame;
                // and the last line counts the rest.
                let filled = lines.filter { !$0.isEmpty }.count
                return lines.count <= height && (filled == height || filled > previous)
                    && (lines.last { !$0.isEmpty }?.hasPrefix("… and ") ?? false)
                    && lines.first?.hasPrefix("daemon ") == true && lines.allSatisfy { $0.count <= columns }
            }
            let frame = lines.joined(separator: "\n")
            let header = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("ID ") && $0.contains("STATE") }, "the header stays:\n\(frame)")
            XCTAssertTrue(lines[..<header].allSatisfy { $0.hasPrefix("daemon ") || $0.hasPrefix("  ") }, frame)
            XCTAssertTrue(lines[header].contains("BYTES"), "a done/total column:\n\(frame)")
            if ProcessInfo.processInfo.environment["SPOOLFETCH_SHOW_FRAMES"] != nil { print(frame) }
            let taskRows = lines[(header + 1)...].filter { !$0.isEmpty && !$0.hasPrefix("… and ") }
            XCTAssertTrue(taskRows.allSatisfy { !$0.hasPrefix(" ") }, "one line per task, no continuation lines:\n\(frame)")
            XCTAssertTrue(taskRows.contains { columns >= 120 ? $0.hasPrefix("add-20261128T073115Z-15812-") : $0.hasPrefix("add") && $0.prefix { $0 != " " }.contains("…") }, "ids whole at 120, else shortened in the middle:\n\(frame)")
            XCTAssertEqual(try pane("#{history_size}"), "0", "nothing scrolled at \(columns) × \(height)")
            previous = lines.filter { !$0.isEmpty }.count
        }

        // Ctrl-C: the terminal is given back (the normal screen, the cursor shown) and it exits 0.
        try tmux(["send-keys", "-t", "w", "C-c"])
        try DirectoryWaiter.waitForFile("watch.exit", in: spool.path("tmp"), timeout: 10)
        XCTAssertEqual(try String(contentsOfFile: exit, encoding: .utf8), "0\n", "exited 0, not killed by a signal")
        XCTAssertEqual(try pane("#{alternate_on}"), "0", "left the alternate screen")
        // What it wrote last: the cursor shown again, then the normal screen back.
        let written = try XCTUnwrap(FileManager.default.contents(atPath: raw))
        XCTAssertTrue(String(decoding: written, as: UTF8.self).hasSuffix("\u{1B}[?25h\u{1B}[?1049l"),
                      "ends with: \(String(decoding: written.suffix(40), as: UTF8.self).debugDescription)")
        XCTAssertFalse(try screen().contains { $0.hasPrefix("daemon ") }, "the normal screen holds no frame")
    }
}
