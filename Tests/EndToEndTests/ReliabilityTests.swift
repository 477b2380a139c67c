import Foundation
import SpoolTestSupport
import XCTest

/// Faults end to end: every one ends in a byte-identical published file or a request in
/// `failed/` with a reason — never a partial or spliced file in the final folder.
final class ReliabilityTests: SpoolTestCase {
    private func marker(_ name: String) throws -> [String: Any] { try json("final", name + ".done") }

    private func partSize(_ spool: TempSpool) -> Int {
        for name in spool.files(in: "staging") where name.hasSuffix(".part") {
            let size = (try? FileManager.default.attributesOfItem(atPath: spool.path("staging", name))[.size] as? Int) ?? 0
            return size
        }
        return 0
    }

    func testConnectionCutResumesWithRangeAndIfRange() throws {
        let body = TestBody.random(count: 3_000_000, seed: 1)
        server.serve("/big", body: body, etag: "\"v1\"", script: [.cut(afterBytes: 1_000_000), .normal])
        try spool.drop("cut", server.url("/big") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--retry-base", "0.05"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "big"), body)
        let requests = server.requests(for: "/big")
        XCTAssertEqual(requests.count, 2)
        XCTAssertNil(requests[0].header("Range"))
        XCTAssertEqual(requests[1].header("Range"), "bytes=1000000-", "the retry asks only for the missing bytes")
        XCTAssertEqual(requests[1].header("If-Range"), "\"v1\"")
        let m = try marker("big")
        XCTAssertEqual(m["sha256"] as? String, TestBody.sha256Hex(body), "the digest covers the whole file")
        XCTAssertEqual(m["attempts"] as? Int, 2)
    }

    func testAWeakETagIsNeverSentInIfRangeTheDateIsOrTheItemStartsOver() throws {
        let date = "Tue, 24 Nov 2026 10:00:00 GMT"
        for (path, lastModified) in [("/weak-dated", Optional(date)), ("/weak-only", nil)] {
            let body = TestBody.random(count: 2_000_000, seed: 60)
            server.serve(path, body: body, etag: "W/\"w\"", lastModified: lastModified,
                         script: [.cut(afterBytes: 800_000), .normal])
            try spool.drop(String(path.dropFirst()), server.url(path) + "\n")
        }
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--retry-base", "0.05"])
        XCTAssertEqual(status, 0, stderr)
        for path in ["/weak-dated", "/weak-only"] {
            XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", String(path.dropFirst()))),
                           TestBody.sha256Hex(TestBody.random(count: 2_000_000, seed: 60)))
            XCTAssertEqual(server.requests(for: path).count, 2)
        }
        let dated = server.requests(for: "/weak-dated")
        XCTAssertEqual(dated.last?.header("Range"), "bytes=800000-", "resumed")
        XCTAssertEqual(dated.last?.header("If-Range"), date, "with the date, not the weak ETag")
        let weakOnly = server.requests(for: "/weak-only")
        XCTAssertNil(weakOnly.last?.header("Range"), "nothing safe to resume with: started over")
        XCTAssertNil(weakOnly.last?.header("If-Range"))
    }

    func testServiceUnavailableWithRetryAfterIsRetriedAfterThatDelay() throws {
        let body = TestBody.random(count: 10_000, seed: 2)
        server.serve("/busy", body: body, script: [.status(503, [("Retry-After", "1")]), .normal])
        try spool.drop("busy", server.url("/busy") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--retry-base", "0.01"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "busy"), body)
        let requests = server.requests(for: "/busy")
        XCTAssertEqual(requests.count, 2)
        XCTAssertGreaterThanOrEqual(requests[1].receivedAt.timeIntervalSince(requests[0].receivedAt), 0.95,
                                    "Retry-After: 1 is honoured although the back-off base is 10 ms")
        XCTAssertEqual(try marker("busy")["attempts"] as? Int, 1, "a 503 paces the host: it costs the item no attempt")
    }

    func testPersistentServerErrorFailsAfterMaxAttemptsWithTheLastStatus() throws {
        server.serve("/down", body: [], script: [.status(500)])
        try spool.drop("down", server.url("/down") + "\n")
        let (status, _) = try DaemonProcess.drain(spool: spool.root,
                                                   extra: ["--retry-base", "0.01", "--retry-cap", "0.05", "--max-attempts", "3"])
        XCTAssertEqual(status, 1)
        XCTAssertEqual(server.requests(for: "/down").count, 3)
        let error = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(spool.read("failed", "down.error"))) as? [String: Any])
        let item = try XCTUnwrap((error["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(item["httpStatus"] as? Int, 500)
        XCTAssertEqual(item["attempts"] as? Int, 3)
        XCTAssertTrue((item["message"] as? String ?? "").contains("gave up after 3 attempts"))
    }

    func testServerIgnoringTheRangeRestartsFromZero() throws {
        let body = TestBody.random(count: 2_000_000, seed: 3)
        server.serve("/norange", body: body, etag: "\"n\"", script: [.cut(afterBytes: 700_000), .ignoreRange])
        try spool.drop("norange", server.url("/norange") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--retry-base", "0.05"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "norange"), body, "the kept prefix is dropped, not spliced")
        XCTAssertEqual(server.requests(for: "/norange")[1].header("Range"), "bytes=700000-")
    }

    func testResourceChangedBetweenAttemptsGivesTheNewVersionWhole() throws {
        let old = TestBody.random(count: 2_000_000, seed: 4)
        let new = TestBody.random(count: 1_500_000, seed: 5)
        server.serve("/changing", body: old, etag: "\"old\"", script: [.stall(afterBytes: 500_000)])
        try spool.drop("changing", server.url("/changing") + "\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--stall-timeout", "1", "--retry-base", "2"])
        defer { daemon.terminate() }
        // Wait until the first attempt has stored its prefix, then change the resource.
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "a partial of 500000 bytes") {
            self.partSize(self.spool) >= 500_000
        }
        server.serve("/changing", body: new, etag: "\"new\"")
        try DirectoryWaiter.waitForFile("changing.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(try spool.read("final", "changing"), new, "If-Range mismatch: the whole new version, nothing of the old")
        let requests = server.requests(for: "/changing")
        XCTAssertEqual(requests.last?.header("If-Range"), "\"old\"")
        XCTAssertEqual(try marker("changing")["etag"] as? String, "\"new\"")
    }

    /// Starts a transfer of `old` that stalls after `keptBytes`, waits until the part holds them,
    /// then replaces the resource with `new` behind a server that ignores `If-Range`.
    private func changeBehindAServerIgnoringIfRange(_ path: String, old: [UInt8], keptBytes: Int, new: [UInt8]) throws -> DaemonProcess {
        server.serve(path, body: old, etag: "\"old\"", script: [.stall(afterBytes: keptBytes)])
        try spool.drop(String(path.dropFirst()), server.url(path) + "\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--stall-timeout", "1", "--retry-base", "0.5"])
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "a partial of \(keptBytes) bytes") {
            self.partSize(self.spool) >= keptBytes
        }
        server.serve(path, body: new, etag: "\"new\"", script: [.ignoreIfRange])
        return daemon
    }

    func testServerIgnoringIfRangeSendsATailOfTheNewVersionWhichIsNotSpliced() throws {
        let old = TestBody.random(count: 2_000_000, seed: 40)
        let new = TestBody.random(count: 1_800_000, seed: 41)
        let daemon = try changeBehindAServerIgnoringIfRange("/spliced", old: old, keptBytes: 500_000, new: new)
        defer { daemon.terminate() }
        try DirectoryWaiter.waitForFile("spliced.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "spliced")), TestBody.sha256Hex(new),
                       "the old prefix is dropped, not spliced to the new tail")
        let requests = server.requests(for: "/spliced")
        XCTAssertEqual(requests.count, 3)
        guard requests.count == 3 else { return }
        XCTAssertEqual(requests[1].header("Range"), "bytes=500000-", "the premise: a resume")
        XCTAssertEqual(requests[1].header("If-Range"), "\"old\"")
        XCTAssertNil(requests[2].header("Range"), "after a 206 of another version, the item starts over")
        let m = try marker("spliced")
        XCTAssertEqual(m["etag"] as? String, "\"new\"")
        XCTAssertEqual(m["sha256"] as? String, TestBody.sha256Hex(new))
    }

    func testServerIgnoringIfRangeAnswering416ForAShorterNewVersionDoesNotPublishTheOldPrefix() throws {
        let old = TestBody.random(count: 2_000_000, seed: 42)
        let new = TestBody.random(count: 1_000_000, seed: 43)
        let daemon = try changeBehindAServerIgnoringIfRange("/shrunk", old: old, keptBytes: 1_000_000, new: new)
        defer { daemon.terminate() }
        try DirectoryWaiter.waitForFile("shrunk.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "shrunk")), TestBody.sha256Hex(new),
                       "a 416 whose total is the kept size, but of another version, does not make the old prefix whole")
        let requests = server.requests(for: "/shrunk")
        XCTAssertEqual(requests.count, 3)
        guard requests.count == 3 else { return }
        XCTAssertEqual(requests[1].header("Range"), "bytes=1000000-", "the premise: a resume answered 416")
        XCTAssertNil(requests[2].header("Range"))
    }

    func testStalledTransferIsCutAndResumed() throws {
        let body = TestBody.random(count: 1_200_000, seed: 6)
        server.serve("/stall", body: body, etag: "\"s\"", script: [.stall(afterBytes: 400_000), .normal])
        try spool.drop("stall", server.url("/stall") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--stall-timeout", "1", "--retry-base", "0.05"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "stall"), body)
        XCTAssertEqual(server.requests(for: "/stall")[1].header("Range"), "bytes=400000-")
        XCTAssertTrue(stderr.contains("timeout") || stderr.contains("Timeout"), stderr)
    }

    func testKillNineMidTransferThenRestartResumesAndPublishesOnce() throws {
        let size = 8 << 20
        let body = TestBody.random(count: size, seed: 7)
        // 64 KiB every 20 ms: about 2.6 s for the whole body, slow enough to kill it half-way
        // even on a busy machine.
        server.serve("/slow", body: body, etag: "\"k\"", script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(20)), .normal])
        try spool.drop("killme", server.url("/slow") + "\nname: slow.bin\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root])
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "half of the body in staging") {
            self.partSize(self.spool) >= size / 2
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        let kept = partSize(spool)
        XCTAssertEqual(spool.claimed(), ["killme"], "the claim survives the crash")
        XCTAssertFalse(spool.files(in: "final").contains("slow.bin"))

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "slow.bin"), body)
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("slow") }, ["slow.bin", "slow.bin.done"], "published exactly once")
        let resumed = try XCTUnwrap(server.requests(for: "/slow").last)
        let range = try XCTUnwrap(resumed.header("Range"), "the restart resumes with a range")
        let offset = Int(range.dropFirst(6).dropLast()) ?? -1
        XCTAssertGreaterThanOrEqual(offset, size / 2)
        XCTAssertLessThanOrEqual(offset, kept)
        XCTAssertEqual(spool.leftovers(in: "active"), [])
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
        print("kill -9 at \(kept) of \(size) bytes; the restart re-fetched \(size - offset) bytes")
    }

    func testSigtermKeepsThePartialAndTheNextRunResumes() throws {
        let size = 6 << 20
        let body = TestBody.random(count: size, seed: 8)
        server.serve("/term", body: body, etag: "\"t\"", script: [.slow(chunkSize: 32 << 10, interval: .milliseconds(20)), .normal])
        try spool.drop("term", server.url("/term") + "\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "a partial") { self.partSize(self.spool) >= 1 << 20 }
        let stopAsked = Date()
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 0)
        XCTAssertLessThan(Date().timeIntervalSince(stopAsked), 5, "SIGTERM ends the daemon within a few seconds")
        XCTAssertGreaterThan(partSize(spool), 0, "the partial is kept")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "term"), body)
        XCTAssertNotNil(server.requests(for: "/term").last?.header("Range"))
    }

    func testTwoDaemonsOnOneSpoolFetchEachItemExactlyOnce() throws {
        let count = 300
        for i in 0..<count { server.serve("/w/\(i)", body: Array("item \(i)".utf8)) }
        let a = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { a.terminate() }
        for i in 0..<count / 2 { try spool.drop("r\(i)", server.url("/w/\(i)") + "\nname: f\(i)\n") }
        // The second worker joins while the first one is publishing: its start-up must not touch
        // what the first one is writing (temp files, journals, group hooks).
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 60, what: "the first group markers") {
            self.spool.files(in: "final").contains { $0.hasSuffix(".group.done") }
        }
        // As if the first worker were half-way through writing a marker right now.
        let inFlight = spool.path("final", ".f0-in-flight.done.tmp")
        _ = FileManager.default.createFile(atPath: inFlight, contents: Data("{".utf8))
        let b = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { b.terminate() }
        try b.waitForStderr(containing: "spoolfetch running", timeout: 30)
        XCTAssertTrue(FileManager.default.fileExists(atPath: inFlight), "a live worker's temp file survives another's start")
        unlink(inFlight)
        for i in count / 2..<count { try spool.drop("r\(i)", server.url("/w/\(i)") + "\nname: f\(i)\n") }
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 120, what: "\(count) group markers") {
            self.spool.files(in: "final").filter { $0.hasSuffix(".group.done") }.count == count
        }
        for i in 0..<count {
            XCTAssertEqual(server.requests(for: "/w/\(i)").count, 1, "item \(i) fetched exactly once")
            XCTAssertEqual(try spool.read("final", "f\(i)"), Array("item \(i)".utf8))
        }
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasSuffix("-1") }, [], "nothing published twice")
        a.signal(SIGTERM); b.signal(SIGTERM)
        XCTAssertEqual(try a.waitForExit(timeout: 10), 0)
        XCTAssertEqual(try b.waitForExit(timeout: 10), 0)
        for (worker, log) in [("first", a.stderrText), ("second", b.stderrText)] {
            for trouble in ["publishing failed", "could not end the group", "adopting"] {
                XCTAssertFalse(log.contains(trouble), "the \(worker) worker logged '\(trouble)':\n\(log)")
            }
        }
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "no journal left behind")
    }

    func testKillNineBetweenTwoItemsOfARequestDoesNotFetchOrPublishTheFirstAgain() throws {
        try killNineAfterTheFirstItem(Array("first item".utf8), etag: nil)
    }

    /// A body of 1 MiB or more with a validator gets `B.state` (phase running) when it begins, for
    /// resuming, and keeps it until its group ends; the batch journal that published it is newer
    /// and must win after a crash.
    func testKillNineAfterALargeFirstItemWithAResumeStateDoesNotFetchOrPublishItAgain() throws {
        try killNineAfterTheFirstItem(TestBody.random(count: 2 << 20, seed: 13), etag: "\"f\"")
    }

    /// Two items, `kill -9` once the first is published, then a drain: the first is neither fetched
    /// nor published again.
    private func killNineAfterTheFirstItem(_ firstBody: [UInt8], etag: String?) throws {
        let second = TestBody.random(count: 4 << 20, seed: 12)
        // A large first body arrives over ~320 ms, so that the engine sees it begin while it runs
        // (and writes its resume state) rather than after it has ended.
        server.serve("/first", body: firstBody, etag: etag,
                     script: etag == nil ? [] : [.slow(chunkSize: 128 << 10, interval: .milliseconds(20))])
        server.serve("/second", body: second, etag: "\"s\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(20)), .normal])
        try spool.drop("pair", server.url("/first") + "\nname: one.txt\n" + server.url("/second") + "\nname: two.bin\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root])
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 30, what: "the first item's marker") {
            self.spool.files(in: "final").contains("one.txt.done")
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        XCTAssertEqual(spool.claimed(), ["pair"], "the request is still open: its second item runs")
        if etag != nil {
            XCTAssertTrue(spool.files(in: "staging").contains("pair.0.state"),
                          "the premise: the published item's resume state is still there")
        }

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/first").count, 1, "the published item is not fetched again")
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("one") }, ["one.txt", "one.txt.done"],
                       "nor published twice")
        XCTAssertEqual(try spool.read("final", "one.txt"), firstBody)
        XCTAssertEqual(try spool.read("final", "two.bin"), second)
        let group = try JSONSerialization.jsonObject(with: Data(try spool.read("final", "pair.group.done"))) as? [String: Any]
        XCTAssertEqual((group?["items"] as? [[String: Any]])?.map { $0["file"] as? String }, ["one.txt", "two.bin"])
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "the dead run's journal is spent")
    }

    /// A consumer takes each file and its marker away as they arrive (what per-file markers are
    /// for). After `kill -9` the journal is the only trace of such an item: it is neither fetched
    /// nor delivered again, and the group marker still lists it.
    func testKillNineAfterAConsumerTookAPublishedFileDoesNotDeliverItAgain() throws {
        let firstBody = TestBody.random(count: 20_000, seed: 14)
        let second = TestBody.random(count: 4 << 20, seed: 15)
        server.serve("/first", body: firstBody)
        server.serve("/second", body: second, etag: "\"s\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(20)), .normal])
        try spool.drop("pair", server.url("/first") + "\nname: one.txt\n" + server.url("/second") + "\nname: two.bin\n")
        // The item hook runs once the publish batch has ended: then the consumer takes the file.
        let hooked = spool.root + "/hooked.log"
        let first = try DaemonProcess.launch(["run", "--spool", spool.root,
                                              "--on-item", "echo \"$SPOOLFETCH_PATH\" >> '\(hooked)'"])
        try DirectoryWaiter.wait(in: spool.root, timeout: 30, what: "the first item's hook") {
            (try? String(contentsOfFile: hooked, encoding: .utf8))?.contains("one.txt") ?? false
        }
        try FileManager.default.removeItem(atPath: spool.path("final", "one.txt"))
        try FileManager.default.removeItem(atPath: spool.path("final", "one.txt.done"))
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        XCTAssertEqual(spool.claimed(), ["pair"], "the request is still open: its second item runs")

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/first").count, 1, "the consumed item is not fetched again")
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("one") }, [], "nor delivered again")
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "two.bin")), TestBody.sha256Hex(second))
        let group = try json("final", "pair.group.done")
        let items = try XCTUnwrap(group["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["file"] as? String }, ["one.txt", "two.bin"])
        XCTAssertEqual(items.map { $0["outcome"] as? String }, ["published", "published"])
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "the dead run's journal is spent")
    }

    func testRequestOfADeadWorkerIsAdoptedByTheOtherOne() throws {
        let body = TestBody.random(count: 4 << 20, seed: 9)
        server.serve("/adopt", body: body, etag: "\"a\"", script: [.slow(chunkSize: 128 << 10, interval: .milliseconds(20)), .normal])
        let survivor = try DaemonProcess.launch(["run", "--spool", spool.root, "--adopt-interval", "0.5"])
        defer { survivor.terminate() }
        // The doomed worker gets the request: it starts first and is the only one to see it...
        let doomed = try DaemonProcess.launch(["run", "--spool", spool.root, "--once"])
        try spool.drop("orphan", server.url("/adopt") + "\n")
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "a partial") { self.partSize(self.spool) >= 1 << 20 }
        // ... whichever of the two claimed it, kill that one if it is the doomed worker.
        doomed.signal(SIGKILL)
        _ = try doomed.waitForExit(timeout: 10)
        try DirectoryWaiter.waitForFile("orphan.group.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(try spool.read("final", "adopt"), body)
    }

    func testBurstOfTwentyThousandRequestsIsEveryOneClaimed() throws {
        let count = 20_000
        server.serve("/tiny", body: Array("t".utf8))
        // Prepared in tmp/ first, then renamed in as fast as possible while the daemon runs:
        // far more events than the inotify queue holds (16,384 by default).
        for i in 0..<count {
            let fd = open(spool.path("tmp", "b\(i)"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            let text = "url: \(server.url("/tiny"))?\(i)\nname: t\(i)\n"
            _ = text.withCString { write(fd, $0, strlen($0)) }
            close(fd)
        }
        // Under the usual default open-file limit (a systemd service's, most CI machines'), however
        // high the limit of the machine running the tests.
        let daemon = try DaemonProcess.launch(openFiles: 1024, ["run", "--spool", spool.root, "--concurrency", "32",
                                                                "--per-host", "32", "--log-level", "notice"])
        defer { daemon.terminate() }
        try DirectoryWaiter.waitForFile("active", in: spool.root, timeout: 30)
        let started = Date()
        for i in 0..<count { XCTAssertEqual(rename(spool.path("tmp", "b\(i)"), spool.path("incoming", "b\(i)")), 0) }
        // Each request file moves into done/ last, after its group marker in final/.
        try DirectoryWaiter.wait(in: spool.path("done"), timeout: 600, what: "\(count) requests ended") {
            self.spool.endedRequestCount() >= count
        }
        let seconds = Date().timeIntervalSince(started)
        XCTAssertEqual(spool.files(in: "incoming"), [])
        XCTAssertEqual(spool.claimed(), [], "no claim left")
        let done = Set(spool.files(in: "final"))
        for i in 0..<count { XCTAssertTrue(done.contains("b\(i).group.done"), "b\(i) was claimed and ended") }
        XCTAssertEqual(server.requests(for: "/tiny").count, count)
        XCTAssertEqual(spool.files(in: "failed"), [], "none failed")
        print("burst: \(count) requests renamed in at once, all claimed and published in \(String(format: "%.1f", seconds)) s (\(Int(Double(count) / seconds))/s)")
    }

    func testFullDiskWaitsKeepsThePartialAndResumesWhenSpaceReturns() throws {
        guard geteuid() == 0 else { throw XCTSkip("mounting a small tmpfs needs root") }
        let mountPoint = spool.path("small-disk")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard run("/bin/mount", ["-t", "tmpfs", "-o", "size=3m", "tmpfs", mountPoint]) == 0 else {
            throw XCTSkip("cannot mount tmpfs here")
        }
        defer { _ = run("/bin/umount", ["-l", mountPoint]) }
        let small = mountPoint + "/spool"
        try FileManager.default.createDirectory(atPath: small + "/incoming", withIntermediateDirectories: true)
        // The body fits the filesystem, and fits what is free when its headers arrive (else it
        // waits there without a byte fetched: SpaceAtFirstByteTests); another program fills the
        // disk while it arrives, and a write meets ENOSPC. A body larger than the whole
        // filesystem fails disk-full at once instead: SpaceEndsTests.
        let body = TestBody.random(count: 2 << 20, seed: 10)
        server.serve("/huge", body: body, etag: "\"h\"", script: [.slow(chunkSize: 65_536, interval: .milliseconds(100))])
        let request = small + "/incoming/full"
        _ = FileManager.default.createFile(atPath: request, contents: Data((server.url("/huge") + "\n").utf8))
        let daemon = try DaemonProcess.launch(["run", "--spool", small, "--min-free", "0", "--log-level", "info"])
        defer { daemon.terminate() }
        // A body of 1 MiB or more gets its B.state when it begins: the body is arriving.
        try DirectoryWaiter.wait(in: small + "/staging", timeout: 30, what: "the body's state file") {
            ((try? FileManager.default.contentsOfDirectory(atPath: small + "/staging")) ?? []).contains { $0.hasSuffix(".state") }
        }
        var figures = statvfs()
        XCTAssertEqual(statvfs(mountPoint, &figures), 0)
        let free = Int(figures.f_bavail) * Int(figures.f_frsize)
        XCTAssertTrue(FileManager.default.createFile(atPath: mountPoint + "/other-program", contents: Data(count: max(0, free - (512 << 10)))))
        try daemon.waitForStderr(containing: "waiting for disk space", timeout: 30)
        XCTAssertFalse(FileManager.default.fileExists(atPath: small + "/failed/full"), "a full disk does not fail the item")
        let freed = Date()
        try FileManager.default.removeItem(atPath: mountPoint + "/other-program")
        try DirectoryWaiter.wait(in: small + "/final", timeout: 60, what: "the file after space returned") {
            FileManager.default.fileExists(atPath: small + "/final/huge.done")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: small + "/final/huge").map { [UInt8]($0) }, body)
        let requests = server.requests(for: "/huge")
        XCTAssertGreaterThanOrEqual(requests.count, 2)
        XCTAssertNotNil(requests.last?.header("Range"), "it resumed from the partial it kept")
        print("full disk: published \(String(format: "%.1f", Date().timeIntervalSince(freed))) s after space was freed")
    }

    private func run(_ tool: String, _ arguments: [String]) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        guard (try? p.run()) != nil else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }
}
