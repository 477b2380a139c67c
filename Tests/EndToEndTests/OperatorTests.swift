import Foundation
import SpoolTestSupport
import XCTest

/// What an operator meets: status, control commands, help, configuration.
final class OperatorTests: SpoolTestCase {
    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText)
    }

    private func statusJSON() throws -> [String: Any] {
        let r = try cli(["status", "--json", "--spool", spool.root])
        // 1: no daemon's report yet (the daemon writes its first one after its first change).
        XCTAssertTrue(r.status == 0 || r.status == 1, r.err)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], r.out)
    }

    private func task(_ id: String) throws -> [String: Any]? {
        (try statusJSON()["tasks"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    /// Items the daemon counts as waiting for their earliest start (nil: no report yet).
    private func waitingToStart() -> Int? {
        let daemons = (try? statusJSON())?["daemons"] as? [[String: Any]]
        return (daemons?.first?["states"] as? [String: Int])?["waiting-start"]
    }

    /// Waits until the daemon's status report shows `id` in `state`.
    private func waitForState(_ id: String, _ state: String) throws {
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "\(id) to be \(state)") {
            (try? self.task(id)?["state"] as? String) == state
        }
    }

    func testStatusJSONListsTasksWithProgressAndTheDaemon() throws {
        let body = TestBody.random(count: 6 << 20, seed: 1)
        // About 20 s for the whole body: long enough to be seen running with a rate on a busy machine.
        server.serve("/slow", body: body, etag: "\"s\"", script: [.slow(chunkSize: 16 << 10, interval: .milliseconds(50))])
        try spool.drop("watched", "url: \(server.url("/slow"))\nexpected-bytes: 6M\n")
        try spool.drop("later", "url: \(server.url("/slow"))?2\nname: later.bin\nearliest-start: 2099-01-01T00:00:00Z\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try waitForState("watched#0", "running")
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "a rate") {
            ((try? self.task("watched#0"))??["rate"] as? Double ?? 0) > 0
        }
        let json = try statusJSON()
        let daemons = try XCTUnwrap(json["daemons"] as? [[String: Any]])
        XCTAssertEqual(daemons.first?["pid"] as? Int, Int(daemon.pid))
        XCTAssertEqual(daemons.first?["running"] as? Int, 1)
        let running = try XCTUnwrap(try task("watched#0"))
        for key in ["id", "request", "group", "name", "url", "state", "bytes", "expected", "rate", "eta", "attempts"] {
            XCTAssertNotNil(running[key], "task has \(key)")
        }
        XCTAssertEqual(running["expected"] as? Int, 6 << 20)
        XCTAssertEqual(try task("later#0")?["state"] as? String, "waiting-start")
        XCTAssertEqual(try task("later#0")?["startsAt"] as? String, "2099-01-01T00:00:00Z")
        let plain = try cli(["status", "--spool", spool.root])
        XCTAssertTrue(plain.out.contains("watched#0\trunning\tslow\t"), plain.out)
    }

    func testPauseResumeCancelAndRetryAgainstARunningDaemon() throws {
        let body = TestBody.random(count: 4 << 20, seed: 2)
        // Both first answers stall part-way, so the items stay running until the operator acts.
        server.serve("/p", body: body, etag: "\"p\"", script: [.stall(afterBytes: 300_000), .normal])
        server.serve("/c", body: body, etag: "\"c\"", script: [.stall(afterBytes: 100_000), .normal])
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try spool.drop("pausable", server.url("/p") + "\n")
        try spool.drop("doomed", server.url("/c") + "\n")
        try waitForState("pausable#0", "running")
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "some bytes of pausable#0") {
            ((try? self.task("pausable#0"))??["bytes"] as? Int ?? 0) >= 100_000
        }

        let paused = try cli(["pause", "pausable#0", "--spool", spool.root])
        XCTAssertEqual(paused.status, 0, paused.err)
        XCTAssertTrue(paused.out.contains("pause: 1 item"), paused.out)
        try waitForState("pausable#0", "paused")
        let requestsWhilePaused = server.requests(for: "/p").count

        let cancelled = try cli(["cancel", "doomed", "--spool", spool.root])
        XCTAssertEqual(cancelled.status, 0, cancelled.err)
        // The request file moving into failed/ (after its .error) is the group's last step.
        try DirectoryWaiter.waitForFile("doomed", in: spool.path("failed"), timeout: 30)
        let error = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(spool.read("failed", "doomed.error"))) as? [String: Any])
        XCTAssertEqual((error["items"] as? [[String: Any]])?.first?["code"] as? String, "cancelled")

        XCTAssertEqual(server.requests(for: "/p").count, requestsWhilePaused, "a paused item is not fetched")
        let resumed = try cli(["resume", "pausable#0", "--spool", spool.root])
        XCTAssertEqual(resumed.status, 0, resumed.err)
        try DirectoryWaiter.waitForFile("pausable.group.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(try spool.read("final", "p"), body)
        XCTAssertNotNil(server.requests(for: "/p").last?.header("Range"), "resume continues from the kept partial")

        let retried = try cli(["retry", "doomed", "--spool", spool.root])
        XCTAssertEqual(retried.status, 0, retried.err)
        XCTAssertTrue(retried.out.contains("queued 1 failed item"), retried.out)
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 60, what: "the retried item") {
            self.spool.files(in: "final").contains("c")
        }
        XCTAssertEqual(try spool.read("final", "c"), body)
        XCTAssertEqual(spool.files(in: "failed"), ["doomed", "doomed.error", "doomed.retried"], "the failure record stays, with the name of its retry")

        let unknown = try cli(["pause", "no-such-request#4", "--spool", spool.root])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.err.contains("unknown id no-such-request#4"), unknown.err)
    }

    /// Waiting single-URL requests are kept compact (no records) until something needs them:
    /// status still lists them with their URL, and an operator's command by name reaches them.
    func testWaitingSingleURLRequestsAreListedAndReachedByName() throws {
        for i in 0..<30 { server.serve("/later\(i)", body: Array("later \(i)".utf8)) }
        server.serve("/due", body: Array("due".utf8))
        for i in 0..<30 {
            try spool.drop(String(format: "later-%02d", i), "url: \(server.url("/later\(i)"))\nearliest-start: 2030-01-01T02:00:00Z\n")
        }
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "30 items waiting to start") {
            self.waitingToStart() == 30
        }
        let listed = try XCTUnwrap(statusJSON()["tasks"] as? [[String: Any]]).filter { $0["state"] as? String == "waiting-start" }
        XCTAssertEqual(listed.count, 20, "the next 20 due")
        for task in listed {
            let id = try XCTUnwrap(task["id"] as? String)
            let n = try XCTUnwrap(Int(id.dropFirst("later-".count).prefix(2)), id)
            XCTAssertEqual(task["url"] as? String, server.url("/later\(n)"), "\(id): read again from the claimed file")
            XCTAssertEqual(task["startsAt"] as? String, "2030-01-01T02:00:00Z")
        }

        let cancelled = try cli(["cancel", "later-05", "--spool", spool.root])
        XCTAssertEqual(cancelled.status, 0, cancelled.err)
        XCTAssertTrue(cancelled.out.contains("cancel: 1 item"), cancelled.out)
        try DirectoryWaiter.waitForFile("later-05", in: spool.path("failed"), timeout: 30)
        let error = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(spool.read("failed", "later-05.error"))) as? [String: Any])
        XCTAssertEqual((error["items"] as? [[String: Any]])?.first?["code"] as? String, "cancelled")

        let paused = try cli(["pause", "later-29#0", "--spool", spool.root])
        XCTAssertEqual(paused.status, 0, paused.err)
        try waitForState("later-29#0", "paused")
        let resumed = try cli(["resume", "later-29#0", "--spool", spool.root])
        XCTAssertEqual(resumed.status, 0, resumed.err)

        try spool.drop("now", server.url("/due") + "\n")
        try DirectoryWaiter.waitForFile("due.done", in: spool.path("final"), timeout: 30)
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "29 items waiting again") {
            self.waitingToStart() == 29
        }
        for i in 0..<30 { XCTAssertEqual(server.requests(for: "/later\(i)").count, 0, "later\(i) is not due") }
        XCTAssertEqual(spool.files(in: "failed"), ["later-05", "later-05.error"])
    }

    func testEveryCommandHasHelpWithAnExample() throws {
        for command in ["run", "add", "status", "cancel", "pause", "resume", "retry"] {
            let r = try cli([command, "--help"])
            XCTAssertEqual(r.status, 0, command)
            XCTAssertTrue(r.out.contains("Example"), "\(command) --help shows an example")
            XCTAssertTrue(r.out.contains("--spool"), "\(command) --help lists --spool")
        }
        let top = try cli(["--help"])
        XCTAssertEqual(top.status, 0)
        for command in ["run", "add", "status", "cancel", "pause", "resume", "retry"] { XCTAssertTrue(top.out.contains(command)) }
        let completion = try cli(["--generate-completion-script", "bash"])
        XCTAssertEqual(completion.status, 0)
        XCTAssertTrue(completion.out.contains("_spoolfetch"), completion.out)
    }

    func testUnknownFlagFailsWithAMessageThatNamesIt() throws {
        let r = try cli(["run", "--concurency", "3", "--spool", spool.root])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.err.contains("--concurency"), r.err)
        let bad = try cli(["run", "--window", "25:00-01:00", "--spool", spool.root])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.err.contains("--window"), bad.err)
    }

    func testConfigFileFlagsAndPrintConfig() throws {
        let file = spool.path("tmp", "spoolfetch.conf")
        try """
            # site settings
            concurrency = 32
            window = "22:00-06:00"
            max-rate = 20M
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let r = try cli(["run", "--config", file, "--concurrency", "8", "--spool", spool.root, "--print-config"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("concurrency = 8"), "a flag overrides the file:\n\(r.out)")
        XCTAssertTrue(r.out.contains("window = \"22:00-06:00\""), r.out)
        XCTAssertTrue(r.out.contains("max-rate = 20M"), r.out)
        XCTAssertTrue(r.out.contains("spool = \"\(spool.root)\""), r.out)
        try "concurrency = lots\n".write(toFile: file, atomically: true, encoding: .utf8)
        let bad = try cli(["run", "--config", file, "--print-config"])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.err.contains("spoolfetch.conf:1") && bad.err.contains("concurrency"), bad.err)
    }

    func testLogsAreStructuredLinesWithLevels() throws {
        server.serve("/l", body: Array("l".utf8))
        try spool.drop("logged", server.url("/l") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--log-level", "debug"])
        XCTAssertEqual(status, 0)
        let lines = stderr.split(separator: "\n")
        XCTAssertFalse(lines.isEmpty)
        for line in lines {
            XCTAssertTrue(line.hasPrefix("time=") && line.contains(" level=") && line.contains(" msg="), String(line))
        }
        XCTAssertTrue(stderr.contains("level=debug msg=published"), stderr)
        let quiet = try DaemonProcess.drain(spool: spool.root, extra: ["--log-level", "warning"])
        XCTAssertEqual(quiet.stderr, "", "nothing at or above warning happened")
    }

    func testReadinessAndStoppingAreNotifiedToSystemd() throws {
        let path = spool.path("tmp", "notify.sock")
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        func receive() -> String? {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 30_000) == 1 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
        }
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root], environment: ["NOTIFY_SOCKET": path])
        defer { daemon.terminate() }
        XCTAssertTrue(receive()?.hasPrefix("READY=1") ?? false, "READY=1 once the daemon watches incoming/")
        daemon.signal(SIGTERM)
        XCTAssertEqual(receive(), "STOPPING=1")
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 0)
    }

    func testRetryStartsAnItemWaitingOutA503NowAndRetryOfAFailedRequestIsIdempotent() throws {
        // A 503 asking for an hour's pause: without the operator the item would wait that long.
        server.serve("/busy", body: Array("busy".utf8), script: [.status(503, [("Retry-After", "3600")]), .normal])
        server.serve("/gone", body: Array("back".utf8), script: [.status(404), .normal])
        try spool.drop("busy", "url: \(server.url("/busy"))\n")
        try spool.drop("lost", "url: \(server.url("/gone"))\nname: gone.txt\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try waitForState("busy#0", "retrying")
        let retried = try cli(["retry", "busy#0", "--spool", spool.root])
        XCTAssertEqual(retried.status, 0, retried.err)
        XCTAssertTrue(retried.out.contains("retry: 1 item"), retried.out)
        try DirectoryWaiter.waitForFile("busy.group.done", in: spool.path("final"), timeout: 20)
        XCTAssertEqual(server.requests(for: "/busy").count, 2, "started at once, not after the hour")

        try DirectoryWaiter.waitForFile("lost.error", in: spool.path("failed"), timeout: 30)
        let first = try cli(["retry", "lost", "--spool", spool.root])
        XCTAssertEqual(first.status, 0, first.err)
        let second = try cli(["retry", "lost", "--spool", spool.root])
        XCTAssertEqual(second.status, 0, second.err)
        XCTAssertTrue((second.out + second.err).contains("not queued twice"), second.out + second.err)
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 30, what: "the retried item published") {
            self.spool.files(in: "final").contains("gone.txt.done")
        }
        XCTAssertEqual(server.requests(for: "/gone").count, 2, "the failed item was fetched once more, not twice more")
        XCTAssertFalse(spool.files(in: "final").contains("gone-1.txt"))
    }

    /// `retry` re-runs the request as written — here its `on-exists: replace` — and a retry of
    /// the whole request after one of its items never queues that item twice.
    func testRetryReRunsTheRequestAsWrittenAndNeverQueuesAnItemTwice() throws {
        server.serve("/old", body: Array("old".utf8))
        server.serve("/new", body: Array("new".utf8), script: [.status(404), .normal])
        server.serve("/other", body: Array("other".utf8), script: [.status(404), .normal])
        try spool.drop("first", "url: \(server.url("/old"))\nname: keep.bin\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "keep.bin"), Array("old".utf8))

        try spool.drop("again", "on-exists: replace\nurl: \(server.url("/new"))\nname: keep.bin\nurl: \(server.url("/other"))\nname: other.bin\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, stderr)

        let one = try cli(["retry", "again#0", "--spool", spool.root])
        XCTAssertEqual(one.status, 0, one.err)
        XCTAssertTrue(one.out.contains("queued 1 failed item"), one.out)
        let whole = try cli(["retry", "again", "--spool", spool.root])
        XCTAssertEqual(whole.status, 0, whole.err)
        XCTAssertTrue(whole.out.contains("queued 1 failed item"), "only the item not queued yet: \(whole.out)")
        XCTAssertTrue(whole.out.contains("#0 were already queued again"), whole.out)
        let third = try cli(["retry", "again", "--spool", spool.root])
        XCTAssertTrue((third.out + third.err).contains("not queued twice"), third.out + third.err)
        let fourth = try cli(["retry", "again#0", "--spool", spool.root])
        XCTAssertTrue((fourth.out + fourth.err).contains("not queued twice"), fourth.out + fourth.err)

        (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "keep.bin"), Array("new".utf8), "on-exists: replace held in the retry")
        XCTAssertEqual(try spool.read("final", "other.bin"), Array("other".utf8))
        let final = spool.files(in: "final")
        XCTAssertFalse(final.contains("keep-1.bin"), "\(final)")
        XCTAssertFalse(final.contains("other-1.bin"), "\(final)")
        XCTAssertEqual(server.requests(for: "/new").count, 2, "the failed item was fetched once more, not twice more")
        XCTAssertEqual(server.requests(for: "/other").count, 2)
    }
}

/// A request name used again (the next night's `nightly`) gets one name for everything it
/// produces: where it is filed, its markers' `request`, its group marker.
final class ReusedNameTests: SpoolTestCase {
    func testANameUsedBeforeGetsOneNameForItsFilesMarkersAndGroupMarker() throws {
        server.serve("/a", body: Array("a".utf8))
        server.serve("/gone", body: [], script: [.status(404)])
        for night in 0..<2 {
            try spool.drop("nightly", "url: \(server.url("/a"))\nurl: \(server.url("/gone"))\n")
            let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
            XCTAssertEqual(status, 1, "night \(night): \(stderr)")
        }
        XCTAssertEqual(spool.files(in: "failed").sorted(), ["nightly", "nightly.error", "nightly~1", "nightly~1.error"])
        let final = spool.files(in: "final")
        XCTAssertTrue(final.contains("nightly.group.done") && final.contains("nightly~1.group.done"), "\(final)")
        XCTAssertFalse(final.contains("nightly-1.group.done"), "\(final)")
        XCTAssertEqual(try json("final", "nightly~1.group.done")["request"] as? String, "nightly~1")
        XCTAssertEqual(try json("failed", "nightly~1.error")["request"] as? String, "nightly~1")
        XCTAssertEqual(try json("final", "a-1.done")["request"] as? String, "nightly~1")
        XCTAssertEqual(try json("final", "a.done")["request"] as? String, "nightly")
    }

    /// `add` prints the request's name and the group marker it will produce, and the daemon
    /// writes exactly that marker: for a new group, and for a group name used again and again
    /// (`add --group nightly` three times: `nightly`, `nightly~1`, `nightly~2`), also when
    /// another producer's request with that `group:` ends first.
    func testAddPrintsTheGroupMarkerItsRequestWillProduce() throws {
        server.serve("/a", body: Array("a".utf8))
        // The added "fresh" answers late: the other producer's "early" of that group ends first.
        server.serve("/late", body: Array("late".utf8), script: [.delayed(.seconds(1))])
        func add(_ extra: [String], path: String = "/a") throws -> (name: String, marker: String) {
            let p = try DaemonProcess.launch(["add", server.url(path), "--spool", spool.root] + extra)
            XCTAssertEqual(try p.waitForExit(timeout: 30), 0, p.stderrText)
            let out = p.stdoutText.split(separator: "\n").map(String.init)
            XCTAssertEqual(out.count, 2, p.stdoutText)
            return (out.first ?? "", out.last ?? "")
        }
        let plain = try add([])
        XCTAssertEqual(plain.marker, spool.path("final", plain.name + ".group.done"))
        let first = try add(["--group", "nightly"])
        XCTAssertEqual(first.name, "nightly")
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 0)
        // Two more while the first has ended, and another producer's file with the same group
        // queued before them: its group end must not take a name add printed.
        try spool.drop("other", "group: nightly\nurl: \(server.url("/a"))\n")
        try spool.drop("early", "group: fresh\nurl: \(server.url("/a"))\n")
        let second = try add(["--group", "nightly"])
        let third = try add(["--group", "nightly"])
        let fresh = try add(["--group", "fresh"], path: "/late")
        XCTAssertEqual([second.name, third.name, fresh.name], ["nightly~1", "nightly~2", "fresh"])
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 0)

        let printed = [plain, first, second, third, fresh]
        XCTAssertEqual(Set(printed.map(\.marker)).count, printed.count, "distinct markers: \(printed)")
        for (name, marker) in printed {
            XCTAssertTrue(FileManager.default.fileExists(atPath: marker), "\(marker) written as add printed")
            let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: marker))) as? [String: Any])
            XCTAssertEqual(json["request"] as? String, name, marker)
        }
        XCTAssertEqual(try json("final", "nightly~2.group.done")["group"] as? String, "nightly", "the group keeps its name")
        let final = spool.files(in: "final")
        XCTAssertTrue(final.contains("nightly-1.group.done") && final.contains("fresh-1.group.done"),
                      "the other producer's requests take GROUP-N: \(final)")
        XCTAssertEqual(try json("final", "fresh-1.group.done")["request"] as? String, "early")

        // add --wait: prints the marker it will produce, then the one it did: the same.
        let waited = try DaemonProcess.launch(["add", server.url("/a"), "--group", "nightly", "--wait", "--timeout", "60",
                                               "--spool", spool.root])
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        XCTAssertEqual(try waited.waitForExit(timeout: 60), 0, waited.stderrText)
        XCTAssertEqual(waited.stdoutText.split(separator: "\n").map(String.init),
                       ["nightly~3", spool.path("final", "nightly~3.group.done"), spool.path("final", "nightly~3.group.done")])
    }

    /// `wait R` follows the newest request of the name: the one just queued, into its claim as
    /// `R~N`, not last night's ended `R`.
    func testWaitFollowsTheNewestRequestOfAReusedName() throws {
        server.serve("/a", body: Array("a".utf8))
        server.serve("/gone", body: [], script: [.status(404)])
        func wait(_ name: String) throws -> DaemonProcess {
            try DaemonProcess.launch(["wait", name, "--timeout", "120", "--spool", spool.root])
        }
        try spool.drop("nightly", "url: \(server.url("/a"))\nurl: \(server.url("/gone"))\n")
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 1)

        // The next night's, queued before any daemon runs: the wait blocks for it.
        try spool.drop("nightly", "url: \(server.url("/a"))\n")
        let queued = try wait("nightly")
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 0)
        XCTAssertEqual(try queued.waitForExit(timeout: 60), 0, "the new one was published: \(queued.stderrText)")
        XCTAssertEqual(queued.stdoutText, spool.path("final", "nightly~1.group.done") + "\n")

        // Both ended: the newest answers.
        let ended = try wait("nightly")
        XCTAssertEqual(try ended.waitForExit(timeout: 60), 0, ended.stderrText)
        XCTAssertEqual(ended.stdoutText, spool.path("final", "nightly~1.group.done") + "\n")

        // Claimed and running (a slow body): the running one.
        server.serve("/slow", body: TestBody.random(count: 400_000, seed: 3), script: [.slow(chunkSize: 16_384, interval: .milliseconds(50))])
        try spool.drop("nightly", "url: \(server.url("/gone"))\nurl: \(server.url("/slow"))\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try DirectoryWaiter.wait(inAny: [spool.path("active"), spool.path("staging"), spool.path("failed")], timeout: 60, what: "night 3 claimed") {
            self.spool.claimed().contains("nightly~2") || self.spool.files(in: "failed").contains("nightly~2")
        }
        let running = try wait("nightly")
        XCTAssertEqual(try running.waitForExit(timeout: 60), 1, "night 3 had a failed item: \(running.stderrText)")
        XCTAssertEqual(running.stdoutText, spool.path("final", "nightly~2.group.done") + "\n")
        XCTAssertTrue(running.stderrText.contains("nightly~2 failed"), running.stderrText)
    }
}
