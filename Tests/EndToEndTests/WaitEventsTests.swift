import Foundation
import SpoolTestSupport
import XCTest

/// `spoolfetch wait`, `add --wait` and `events` against the real daemon: what a script that drops
/// requests and waits, and a consumer of endings that crashes and restarts, rely on.
final class WaitEventsTests: SpoolTestCase {
    private func cli(_ arguments: [String], timeout: Double = 60) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: timeout)
        return (status, p.stdoutText, p.stderrText)
    }

    /// The request's name `add` printed (its first line; the second is the group marker's path).
    private func add(_ url: String, _ extra: [String] = []) throws -> String {
        let r = try cli(["add", url, "--spool", spool.root] + extra)
        XCTAssertEqual(r.status, 0, r.err)
        let printed = lines(r.out)
        XCTAssertEqual(printed.count, 2, r.out)
        XCTAssertEqual(printed.last, spool.path("final", "\(printed[0]).group.done"), "the marker it will produce")
        return printed[0]
    }

    private func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    func testWaitBlocksUntilTheGroupEndsAndExitsByOutcome() throws {
        server.serve("/ok.bin", body: TestBody.random(count: 40_000, seed: 5))
        server.serve("/missing", body: [], script: [.status(404)])
        let ok = try add(server.url("/ok.bin"))
        let bad = try add(server.url("/missing"))
        try spool.drop("broken", "url: ftp://example.org/x\n")

        // Started before any daemon: they must block, not fail, and end when the daemon ends the groups.
        let waitOK = try DaemonProcess.launch(["wait", ok, "--spool", spool.root, "--timeout", "120"])
        let waitBoth = try DaemonProcess.launch(["wait", ok, bad, "broken", "--spool", spool.root, "--timeout", "120"])
        // (A wait sets its inotify watch up before it lists the records, so it cannot miss an
        // ending that lands while it starts.)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }

        XCTAssertEqual(try waitOK.waitForExit(timeout: 60), 0, waitOK.stderrText)
        XCTAssertEqual(lines(waitOK.stdoutText), [spool.path("final", "\(ok).group.done")])
        XCTAssertEqual(try json("final", "\(ok).group.done")["request"] as? String, ok)

        XCTAssertEqual(try waitBoth.waitForExit(timeout: 60), 1, "a failed item and a rejection make 1: " + waitBoth.stderrText)
        XCTAssertEqual(Set(lines(waitBoth.stdoutText)), [spool.path("final", "\(ok).group.done"), spool.path("final", "\(bad).group.done"),
                                                        spool.path("rejected", "broken.error")])
        XCTAssertTrue(waitBoth.stderrText.contains("\(bad) failed"), waitBoth.stderrText)
        XCTAssertTrue(waitBoth.stderrText.contains("broken rejected"), waitBoth.stderrText)

        // Ended already: answered from the records at once; also when the consumer took the
        // group marker away (the request file in done/ still says how it ended).
        XCTAssertEqual(try cli(["wait", ok, "--spool", spool.root]).status, 0)
        try FileManager.default.removeItem(atPath: spool.path("final", "\(ok).group.done"))
        let again = try cli(["wait", ok, "--spool", spool.root])
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertEqual(lines(again.out), [spool.path("done", ok)])

        // add --wait: writes, prints the name, then waits for its group like wait.
        server.serve("/second.bin", body: TestBody.random(count: 1000, seed: 6))
        let r = try cli(["add", server.url("/second.bin"), "--wait", "--timeout", "60", "--spool", spool.root])
        XCTAssertEqual(r.status, 0, r.err)
        let out = lines(r.out)
        XCTAssertEqual(out.count, 3, r.out)
        XCTAssertEqual(out[1], spool.path("final", "\(out[0]).group.done"), "the marker it will produce")
        XCTAssertEqual(out[2], out[1], "and the one it did")
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool.path("final", "second.bin.done")))
    }

    func testWaitTimesOutWith75AndRefusesAnUnknownRequest() throws {
        // Queued, but no daemon runs: the deadline passes.
        let queued = try add("http://127.0.0.1:9/never")
        let started = Date()
        let r = try cli(["wait", queued, "--timeout", "1", "--spool", spool.root])
        XCTAssertEqual(r.status, 75, r.err)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.0, "not before its deadline")
        XCTAssertTrue(r.err.contains("still open: \(queued)"), r.err)
        XCTAssertEqual(r.out, "")

        let unknown = try cli(["wait", "no-such-request", "--timeout", "30", "--spool", spool.root])
        XCTAssertEqual(unknown.status, 2, unknown.err)
        XCTAssertTrue(unknown.err.contains("unknown request no-such-request"), unknown.err)
        XCTAssertEqual(try cli(["wait", queued, "--timeout", "soon", "--spool", spool.root]).status, 64)
    }

    /// A consumer that is killed mid-stream and restarted from the last cursor it printed gets
    /// every ending exactly once — also those that happened while it was down.
    func testConsumerRestartedMidStreamMissesNothingAndSeesNothingTwice() throws {
        var expected = Set<String>()   // "item REQUEST#INDEX", "group REQUEST", "rejected REQUEST"
        func serveAndDrop(_ request: String, items: Int, failing: Set<Int> = [], groupMarkers: Bool = false) throws {
            var text = groupMarkers ? "markers: group\n" : ""
            for i in 0..<items {
                let path = "/\(request)/\(i)"
                if failing.contains(i) {
                    server.serve(path, body: [], script: [.status(404)])
                } else {
                    server.serve(path, body: TestBody.random(count: 3000 + i, seed: UInt64(i)))
                }
                text += "url: \(server.url(path))\nname: \(request)-\(i).bin\n"
                expected.insert("item \(request)#\(i)")
            }
            expected.insert("group \(request)")
            try spool.drop(request, text)
        }
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }

        var consumer = try DaemonProcess.launch(["events", "--follow", "--json", "--spool", spool.root])
        try serveAndDrop("first", items: 5)
        try serveAndDrop("second", items: 4, failing: [2])
        try consumer.waitForStdout(timeout: 60, what: "the first two groups' events") { text in
            let got = text.split(separator: "\n").compactMap { self.key(String($0)) }
            return got.contains("group first") && got.contains("group second")
        }
        // Killed mid-stream: whatever it printed last is where it resumes.
        consumer.signal(SIGKILL)
        _ = try consumer.waitForExit(timeout: 10)
        var seen = lines(consumer.stdoutText).compactMap { key($0) }
        let cursor = try XCTUnwrap(lines(consumer.stdoutText).last.flatMap(cursorOf))

        // While it is down: more endings, a rejection and a group-marker-only request.
        try serveAndDrop("third", items: 3, groupMarkers: true)
        try spool.drop("fourth", "url: gopher://example.org/\n")
        expected.insert("rejected fourth")
        try DirectoryWaiter.wait(inAny: [spool.path("done"), spool.path("rejected")], timeout: 60, what: "third and fourth to end") {
            FileManager.default.fileExists(atPath: self.spool.path("done", "third")) &&
                FileManager.default.fileExists(atPath: self.spool.path("rejected", "fourth"))
        }
        consumer = try DaemonProcess.launch(["events", "--follow", "--json", "--since", cursor, "--spool", spool.root])
        defer { consumer.terminate() }
        try serveAndDrop("fifth", items: 2, failing: [0])
        try consumer.waitForStdout(timeout: 60, what: "every ending after the cursor") { text in
            Set(text.split(separator: "\n").compactMap { self.key(String($0)) }).isSuperset(of: expected.subtracting(seen))
        }
        seen += lines(consumer.stdoutText).compactMap { key($0) }
        XCTAssertEqual(seen.count, Set(seen).count, "nothing twice: \(seen)")
        XCTAssertEqual(Set(seen), expected)

        // A run without --follow from the start lists the same endings, in the same order
        // (cursors strictly increasing), and one from the last cursor lists nothing.
        let all = try cli(["events", "--json", "--spool", spool.root])
        XCTAssertEqual(all.status, 0, all.err)
        let allLines = lines(all.out)
        XCTAssertEqual(Set(allLines.compactMap { key($0) }), expected)
        XCTAssertEqual(allLines.count, expected.count)
        let last = try XCTUnwrap(allLines.last.flatMap(cursorOf))
        XCTAssertEqual(try cli(["events", "--since", last, "--spool", spool.root]).out, "")
        // A failed item carries its reason; a group marker's own items their file.
        let failed = try XCTUnwrap(allLines.compactMap(object).first { $0["request"] as? String == "second" && $0["index"] as? Int == 2 })
        XCTAssertEqual(failed["outcome"] as? String, "failed")
        XCTAssertEqual(failed["code"] as? String, "http-status")
        let grouped = try XCTUnwrap(allLines.compactMap(object).first { $0["request"] as? String == "third" && $0["index"] as? Int == 1 })
        XCTAssertEqual(grouped["file"] as? String, spool.path("final", "third-1.bin"))
        XCTAssertEqual(grouped["sha256"] as? String, TestBody.sha256Hex(TestBody.random(count: 3001, seed: 1)))
        XCTAssertEqual(try cli(["events", "--since", "garbage", "--spool", spool.root]).status, 64)
    }

    private func object(_ line: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    private func key(_ line: String) -> String? {
        guard let o = object(line), let event = o["event"] as? String, let request = o["request"] as? String else { return nil }
        if event == "item", let index = o["index"] as? Int { return "item \(request)#\(index)" }
        return "\(event) \(request)"
    }

    private func cursorOf(_ line: String) -> String? { object(line)?["cursor"] as? String }
}
