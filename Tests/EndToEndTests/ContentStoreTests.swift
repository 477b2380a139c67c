import Foundation
import SpoolTestSupport
import XCTest

/// The content store (`--store`): bodies verified against their `sha256:` are kept by digest, and
/// later items with that digest are published from the store without a request — once per digest
/// however many items, requests and workers want it.
final class ContentStoreTests: SpoolTestCase {
    /// Every GET the server saw for `paths`.
    private func gets(_ paths: [String]) -> Int { paths.reduce(0) { $0 + server.requests(for: $1).count } }

    /// A series' value in exposition text (its first line, whatever its labels).
    private func metric(_ name: String, in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            return line.split(separator: " ").last.flatMap { Double($0) }
        }
        return nil
    }

    private func storeEntry(_ digest: String) -> String {
        spool.root + "/store/sha256/" + digest.prefix(2) + "/" + digest
    }

    func testThreeRequestsOfTwentyItemsOverTenDigestsMakeTenGETsAndSixtyFilesWithMarkers() throws {
        let bodies = (0..<10).map { TestBody.random(count: 20_000 + $0 * 997, seed: UInt64(100 + $0)) }
        var paths: [String] = []
        for r in 0..<3 {
            var text = ""
            for i in 0..<20 {
                // Each item its own URL: the store knows bytes by digest, not by URL.
                let path = "/r\(r)/f\(i).bin"
                server.serve(path, body: bodies[i % 10])
                paths.append(path)
                text += "url: \(server.url(path))\nname: r\(r)-\(i).bin\nsha256: \(TestBody.sha256Hex(bodies[i % 10]))\n"
            }
            try spool.drop("req\(r)", text)
        }
        let prom = spool.root + "/metrics.prom"
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--log-level", "debug",
                                                                                    "--metrics-file", prom])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(gets(paths), 10, "one GET per digest")
        let text = try String(contentsOfFile: prom, encoding: .utf8)
        let stored: Int = bodies.map(\.count).reduce(0, +)
        let requested: Int = (0..<20).map { (i: Int) -> Int in bodies[i % 10].count }.reduce(0, +) * 3
        let saved = requested - stored
        for line in ["spoolfetch_store_hits_total{worker=", "spoolfetch_store_entries{worker="] {
            XCTAssertTrue(text.contains(line), text)
        }
        XCTAssertEqual(metric("spoolfetch_store_hits_total", in: text), 50, text)
        XCTAssertEqual(metric("spoolfetch_store_saved_bytes_total", in: text), Double(saved), text)
        XCTAssertEqual(metric("spoolfetch_store_entries", in: text), 10, text)
        XCTAssertEqual(metric("spoolfetch_store_bytes", in: text), Double(stored), text)
        var fromStore = 0
        for r in 0..<3 {
            for i in 0..<20 {
                XCTAssertEqual(try spool.read("final", "r\(r)-\(i).bin"), bodies[i % 10])
                let marker = try json("final", "r\(r)-\(i).bin.done")
                XCTAssertEqual(marker["sha256"] as? String, TestBody.sha256Hex(bodies[i % 10]))
                XCTAssertEqual(marker["bytes"] as? Int, bodies[i % 10].count)
                if marker["source"] as? String == "store" { fromStore += 1 }
            }
        }
        XCTAssertEqual(fromStore, 50, "the other 50 were published from the store")
        for body in bodies {
            let digest = TestBody.sha256Hex(body)
            var st = stat()
            XCTAssertEqual(stat(storeEntry(digest), &st), 0, "entry sha256/\(digest.prefix(2))/\(digest)")
            XCTAssertEqual(st.st_mode & 0o777, 0o444, "entries are read-only")
            XCTAssertEqual(try Array(Data(contentsOf: URL(fileURLWithPath: storeEntry(digest)))), body)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.root + "/store/tmp"), [], "no temp files left")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.root + "/store/claims"), [], "no claims left")
    }

    func testALaterRunPublishesFromTheStoreWithoutARequestAndOnExistsApplies() throws {
        let body = TestBody.random(count: 300_000, seed: 7)
        let digest = TestBody.sha256Hex(body)
        server.serve("/a.bin", body: body)
        try spool.drop("first", "url: \(server.url("/a.bin"))\nsha256: \(digest)\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/a.bin").count, 1)
        XCTAssertNil(try json("final", "a.bin.done")["source"], "fetched from its URL: no source")

        // The same digest again under its name (keep both: a -1 name), and with on-exists: replace.
        try spool.drop("again", "url: \(server.url("/a.bin"))\nsha256: \(digest)\n")
        try spool.drop("replace", "on-exists: replace\nurl: \(server.url("/other.bin"))\nname: a.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/a.bin").count, 1, "no request for a digest in the store")
        XCTAssertEqual(server.requests(for: "/other.bin").count, 0, "the URL is never asked: the store has the bytes")
        XCTAssertEqual(try spool.read("final", "a-1.bin"), body)
        XCTAssertEqual(try spool.read("final", "a.bin"), body)
        let marker = try json("final", "a-1.bin.done")
        XCTAssertEqual(marker["source"] as? String, "store")
        XCTAssertEqual(marker["sha256"] as? String, digest)
        XCTAssertEqual(marker["bytes"] as? Int, body.count)
        XCTAssertEqual(try json("final", "a.bin.done")["source"] as? String, "store", "replaced by the store's copy")
        XCTAssertFalse(spool.files(in: "final").contains("a-2.bin"), "replace takes the name, never a -N one")
        // A copy, not the store's file: the consumer may edit it.
        var published = stat(), entry = stat()
        XCTAssertEqual(stat(spool.path("final", "a-1.bin"), &published), 0)
        XCTAssertEqual(stat(storeEntry(digest), &entry), 0)
        XCTAssertNotEqual(published.st_ino, entry.st_ino)
    }

    func testStoreLinkHardlinkPublishesTheEntryItself() throws {
        let body = TestBody.random(count: 40_000, seed: 8)
        let digest = TestBody.sha256Hex(body)
        server.serve("/h.bin", body: body)
        try spool.drop("one", "url: \(server.url("/h.bin"))\nsha256: \(digest)\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        try spool.drop("two", "url: \(server.url("/h.bin"))\nname: h2.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--store-link", "hardlink"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/h.bin").count, 1)
        XCTAssertEqual(try spool.read("final", "h2.bin"), body)
        XCTAssertEqual(try json("final", "h2.bin.done")["source"] as? String, "store")
        var published = stat(), entry = stat()
        XCTAssertEqual(stat(spool.path("final", "h2.bin"), &published), 0)
        XCTAssertEqual(stat(storeEntry(digest), &entry), 0)
        XCTAssertEqual(published.st_ino, entry.st_ino, "hardlink: one inode")
        XCTAssertEqual(published.st_mode & 0o777, 0o444, "the store's file: read-only")
        // on-exists: replace takes the name again, the same way.
        try spool.drop("three", "on-exists: replace\nurl: \(server.url("/h.bin"))\nname: h2.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--store-link", "hardlink"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "h2.bin"), body)
        XCTAssertFalse(spool.files(in: "final").contains("h2-1.bin"))
        XCTAssertEqual(stat(spool.path("final", "h2.bin"), &published), 0)
        XCTAssertEqual(published.st_ino, entry.st_ino)
        XCTAssertEqual(server.requests(for: "/h.bin").count, 1)
    }

    /// A store on another filesystem (tmpfs in /dev/shm) than the final folder: hardlinks cannot
    /// reach, so hits are copies, and the log says so.
    func testAHardlinkStoreOnAnotherFilesystemPublishesCopies() throws {
        let shm = "/dev/shm/spoolfetch-store-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: shm) }
        var here = stat(), there = stat()
        XCTAssertEqual(stat(spool.root, &here), 0)
        try FileManager.default.createDirectory(atPath: shm, withIntermediateDirectories: true)
        XCTAssertEqual(stat(shm, &there), 0)
        XCTAssertNotEqual(here.st_dev, there.st_dev, "the test needs /dev/shm on another filesystem than the spool")
        let body = TestBody.random(count: 70_000, seed: 17)
        let digest = TestBody.sha256Hex(body)
        server.serve("/x.bin", body: body)
        try spool.drop("one", "url: \(server.url("/x.bin"))\nsha256: \(digest)\n")
        try spool.drop("two", "url: \(server.url("/x.bin"))\nname: y.bin\nsha256: \(digest)\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", shm, "--store-link", "hardlink"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertTrue(stderr.contains("on different filesystems: hits are copies"), stderr)
        XCTAssertEqual(server.requests(for: "/x.bin").count, 1)
        XCTAssertEqual(try spool.read("final", "x.bin"), body)
        XCTAssertEqual(try spool.read("final", "y.bin"), body)
        XCTAssertTrue(FileManager.default.fileExists(atPath: shm + "/sha256/" + digest.prefix(2) + "/" + digest))
    }

    func testABodyThatDoesNotMatchItsSha256NeverEntersTheStoreAndItemsWithoutSha256AreNotStored() throws {
        let body = TestBody.random(count: 10_000, seed: 9)
        let wrong = TestBody.sha256Hex(Array("not this".utf8))
        server.serve("/w.bin", body: body)
        server.serve("/n.bin", body: body)
        try spool.drop("bad", "url: \(server.url("/w.bin"))\nsha256: \(wrong)\n")
        try spool.drop("plain", "url: \(server.url("/n.bin"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--max-attempts", "1"])
        XCTAssertEqual(status, 1, stderr)
        XCTAssertEqual(try spool.read("final", "n.bin"), body)
        let shards = (try? FileManager.default.contentsOfDirectory(atPath: spool.root + "/store/sha256")) ?? []
        XCTAssertEqual(shards, [], "nothing verified against a sha256: nothing stored")
    }

    func testAStoreElsewhereAndWithoutTheFlagTheStoreIsNotUsed() throws {
        let body = TestBody.random(count: 5_000, seed: 10)
        let digest = TestBody.sha256Hex(body)
        server.serve("/s.bin", body: body)
        let elsewhere = try TempSpool()
        try spool.drop("one", "url: \(server.url("/s.bin"))\nsha256: \(digest)\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", elsewhere.root + "/cas"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: elsewhere.root + "/cas/sha256/" + digest.prefix(2) + "/" + digest))
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.root + "/store"))
        try spool.drop("two", "url: \(server.url("/s.bin"))\nname: s2.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/s.bin").count, 2, "without --store every item is fetched")
    }

    // MARK: Single flight

    /// The daemon's live report, when one names a task in `state`.
    private func tasks(inState state: String) -> [[String: Any]] {
        var out: [[String: Any]] = []
        for file in spool.files(in: "status") where file.hasSuffix(".json") {
            guard let data = try? spool.read("status", file),
                  let report = try? JSONSerialization.jsonObject(with: Data(data)) as? [String: Any],
                  let tasks = report["tasks"] as? [[String: Any]] else { continue }
            out += tasks.filter { $0["state"] as? String == state }
        }
        return out
    }

    func testAWaitingItemSaysInStatusWhatItWaitsForAndPublishesFromTheStore() throws {
        let body = TestBody.random(count: 60_000, seed: 11)
        let digest = TestBody.sha256Hex(body)
        // About 2 s of body: long enough to see the other item wait.
        server.serve("/slow.bin", body: body, script: [.slow(chunkSize: 2_000, interval: .milliseconds(60))])
        server.serve("/same.bin", body: body)
        try spool.drop("pair", """
            url: \(server.url("/slow.bin"))
            sha256: \(digest)
            url: \(server.url("/same.bin"))
            sha256: \(digest)
            """)
        let daemon = try DaemonProcess.launch(["run", "--once", "--spool", spool.root, "--store", "yes"])
        var waiting: [[String: Any]] = []
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "a waiting-store task in status") {
            waiting = tasks(inState: "waiting-store")
            return !waiting.isEmpty
        }
        XCTAssertEqual(waiting.first?["id"] as? String, "pair#1")
        XCTAssertEqual(waiting.first?["waitingFor"] as? String, "waiting for sha256:\(digest.prefix(12))… fetched by pair#0")
        let lines = try runClient(["status", "--spool", spool.root])
        XCTAssertTrue(lines.contains("waiting for sha256:\(digest.prefix(12))"), lines)
        XCTAssertEqual(try daemon.waitForExit(timeout: 60), 0, daemon.stderrText)
        XCTAssertEqual(server.requests(for: "/slow.bin").count, 1)
        XCTAssertEqual(server.requests(for: "/same.bin").count, 0, "the waiter asked no server")
        XCTAssertEqual(try spool.read("final", "same.bin"), body)
        XCTAssertEqual(try json("final", "same.bin.done")["source"] as? String, "store")
    }

    func testAWaitingItemCanBeCancelledAndTheFetchGoesOn() throws {
        let body = TestBody.random(count: 60_000, seed: 15)
        let digest = TestBody.sha256Hex(body)
        server.serve("/slow2.bin", body: body, script: [.slow(chunkSize: 2_000, interval: .milliseconds(60))])
        server.serve("/other.bin", body: body)
        try spool.drop("pair", """
            url: \(server.url("/slow2.bin"))
            sha256: \(digest)
            url: \(server.url("/other.bin"))
            sha256: \(digest)
            """)
        let daemon = try DaemonProcess.launch(["run", "--once", "--spool", spool.root, "--store", "yes"])
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "a waiting-store task in status") {
            !tasks(inState: "waiting-store").isEmpty
        }
        let cancel = try client(["cancel", "pair#1", "--spool", spool.root])
        XCTAssertEqual(cancel.status, 0, cancel.out)
        XCTAssertEqual(try daemon.waitForExit(timeout: 60), 1, daemon.stderrText)
        XCTAssertEqual(try spool.read("final", "slow2.bin"), body, "the fetch went on")
        XCTAssertEqual(server.requests(for: "/other.bin").count, 0)
        let error = try json("failed", "pair.error")
        let items = try XCTUnwrap(error["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "cancelled")
        XCTAssertEqual(items.first?["index"] as? Int, 1)
    }

    func testAStopWhileAnItemWaitsEndsTheDaemonAndTheNextRunFinishes() throws {
        let body = TestBody.random(count: 200_000, seed: 16)
        let digest = TestBody.sha256Hex(body)
        server.serve("/s3.bin", body: body, script: [.slow(chunkSize: 2_000, interval: .milliseconds(60)), .normal])
        server.serve("/s4.bin", body: body)
        try spool.drop("stop", """
            url: \(server.url("/s3.bin"))
            sha256: \(digest)
            url: \(server.url("/s4.bin"))
            sha256: \(digest)
            """)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--store", "yes"])
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "a waiting-store task in status") {
            !tasks(inState: "waiting-store").isEmpty
        }
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.root + "/store/claims"), [], "the claim went with the fetch")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "s3.bin"), body)
        XCTAssertEqual(try spool.read("final", "s4.bin"), body)
        XCTAssertEqual(server.requests(for: "/s4.bin").count, 0, "the second item never asked its server")
    }

    /// A waiter holds no connection: with `--concurrency 2`, one item fetching a digest from a
    /// server that stalls, a second item of that digest waiting for it, and a third of another
    /// digest — the third starts and is published while the first still fetches and the second
    /// still waits (before, the waiter kept the second slot and the third never started).
    func testAWaiterHoldsNoConnectionSlotSoAnotherItemStartsMeanwhile() throws {
        let body = TestBody.random(count: 60_000, seed: 17)
        let digest = TestBody.sha256Hex(body)
        let other = TestBody.random(count: 5_000, seed: 18)
        server.serve("/held.bin", body: body, script: [.stall(afterBytes: 1_000), .normal])
        server.serve("/twin.bin", body: body)
        server.serve("/third.bin", body: other)
        try spool.drop("slots", """
            url: \(server.url("/held.bin"))
            sha256: \(digest)
            url: \(server.url("/twin.bin"))
            sha256: \(digest)
            url: \(server.url("/third.bin"))
            """)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--store", "yes", "--concurrency", "2",
                                               "--log-level", "debug"])
        let third = spool.root + "/final/third.bin.done"
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 30, what: "third.bin's marker while held.bin stalls") {
            FileManager.default.fileExists(atPath: third)
        }
        XCTAssertEqual(try spool.read("final", "third.bin"), other)
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.root + "/final/held.bin"), "the first still fetches")
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.root + "/final/twin.bin"), "the second still waits")
        XCTAssertEqual(server.requests(for: "/held.bin").count, 1)
        XCTAssertEqual(server.requests(for: "/twin.bin").count, 0)
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText)
        XCTAssertTrue(daemon.stderrText.contains("waiting for another fetch of the same sha256"), daemon.stderrText)
    }

    func testWhenTheFetchFailsTheWaiterFetchesItself() throws {
        let body = TestBody.random(count: 50_000, seed: 12)
        let digest = TestBody.sha256Hex(body)
        // The first item allows fewer bytes than the body has (sent slowly, so the second waits): it fails.
        server.serve("/bad.bin", body: body, script: [.slow(chunkSize: 2_000, interval: .milliseconds(40))])
        server.serve("/good.bin", body: body)
        try spool.drop("fails", """
            url: \(server.url("/bad.bin"))
            sha256: \(digest)
            max-bytes: 10000
            url: \(server.url("/good.bin"))
            sha256: \(digest)
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--max-attempts", "1", "--log-level", "debug"])
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(stderr.contains("waiting for another fetch of the same sha256"), stderr)
        XCTAssertEqual(server.requests(for: "/bad.bin").count, 1)
        XCTAssertEqual(server.requests(for: "/good.bin").count, 1, "the waiter fetched it itself")
        XCTAssertEqual(try spool.read("final", "good.bin"), body)
        XCTAssertNil(try json("final", "good.bin.done")["source"])
        XCTAssertTrue(FileManager.default.fileExists(atPath: storeEntry(digest)))
    }

    /// `spoolfetch ARGS`' standard output.
    private func runClient(_ arguments: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: DaemonProcess.executablePath)
        p.arguments = arguments
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: Two workers

    /// Worker A claims the first request and fetches its body slowly; worker B, started on the
    /// same spool with a second request of the same digest, waits for A's claim and publishes
    /// from the store: one GET for both.
    func testTwoWorkersOnOneSpoolFetchTheSameDigestOnce() throws {
        let body = TestBody.random(count: 80_000, seed: 13)
        let digest = TestBody.sha256Hex(body)
        server.serve("/a.bin", body: body, script: [.slow(chunkSize: 4_000, interval: .milliseconds(60))])
        server.serve("/b.bin", body: body)
        try spool.drop("ra", "url: \(server.url("/a.bin"))\nsha256: \(digest)\n")
        // A sees incoming/ only at start: the second request is B's.
        let a = try DaemonProcess.launch(["run", "--spool", spool.root, "--store", "yes", "--inotify", "no",
                                          "--rescan-interval", "3600"])
        defer { a.terminate() }
        try a.waitForStderr(containing: "spoolfetch running", timeout: 30)     // the store's folders exist
        try DirectoryWaiter.wait(in: spool.path("store/claims"), timeout: 30, what: "A's claim on the digest") {
            spool.files(in: "store/claims").contains(digest)
        }
        try spool.drop("rb", "url: \(server.url("/b.bin"))\nsha256: \(digest)\n")
        let b = try DaemonProcess.launch(["run", "--once", "--spool", spool.root, "--store", "yes", "--log-level", "debug"])
        XCTAssertEqual(try b.waitForExit(timeout: 60), 0, b.stderrText)
        XCTAssertTrue(b.stderrText.contains("waiting for another fetch of the same sha256"), b.stderrText)
        XCTAssertEqual(server.requests(for: "/a.bin").count, 1)
        XCTAssertEqual(server.requests(for: "/b.bin").count, 0, "B waited for A's fetch")
        XCTAssertEqual(try spool.read("final", "b.bin"), body)
        XCTAssertEqual(try json("final", "b.bin.done")["source"] as? String, "store")
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 30, what: "A's marker") {
            spool.files(in: "final").contains("a.bin.done")
        }
        a.signal(SIGTERM)
        XCTAssertEqual(try a.waitForExit(timeout: 30), 0, a.stderrText)
        XCTAssertEqual(try spool.read("final", "a.bin"), body)
    }

    /// The claim's holder killed with SIGKILL mid-fetch: the waiter on the other worker sees its
    /// process gone, takes the claim over and fetches.
    func testAWaiterTakesOverTheClaimOfAKilledWorker() throws {
        let body = TestBody.random(count: 80_000, seed: 14)
        let digest = TestBody.sha256Hex(body)
        server.serve("/k.bin", body: body, script: [.stall(afterBytes: 1_000), .normal])
        server.serve("/k2.bin", body: body)
        try spool.drop("rk", "url: \(server.url("/k.bin"))\nsha256: \(digest)\n")
        let a = try DaemonProcess.launch(["run", "--spool", spool.root, "--store", "yes", "--inotify", "no",
                                          "--rescan-interval", "3600", "--adopt-interval", "0"])
        try a.waitForStderr(containing: "spoolfetch running", timeout: 30)     // the store's folders exist
        try DirectoryWaiter.wait(in: spool.path("store/claims"), timeout: 30, what: "A's claim on the digest") {
            spool.files(in: "store/claims").contains(digest)
        }
        try spool.drop("rk2", "url: \(server.url("/k2.bin"))\nsha256: \(digest)\n")
        let b = try DaemonProcess.launch(["run", "--spool", spool.root, "--store", "yes", "--log-level", "debug",
                                          "--adopt-interval", "0"])
        defer { b.terminate() }
        try b.waitForStderr(containing: "waiting for another fetch of the same sha256", timeout: 30)
        a.signal(SIGKILL)
        _ = try a.waitForExit(timeout: 30)
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 30, what: "B's marker") {
            spool.files(in: "final").contains("k2.bin.done")
        }
        XCTAssertEqual(try spool.read("final", "k2.bin"), body)
        XCTAssertEqual(server.requests(for: "/k2.bin").count, 1, "B fetched it once A was gone")
        XCTAssertTrue(b.stderrText.contains("took over a stale store claim"), b.stderrText)
    }

    // MARK: Hashed mirrors

    func testHashedMirrorsAreTriedInOrderBeforeTheOwnURLAnd404OrAWrongBodyFallsThroughWithoutAnAttempt() throws {
        let a = TestBody.random(count: 30_000, seed: 21), b = TestBody.random(count: 20_000, seed: 22)
        let c = TestBody.random(count: 10_000, seed: 23)
        let (da, db, dc) = (TestBody.sha256Hex(a), TestBody.sha256Hex(b), TestBody.sha256Hex(c))
        // m1 has nothing (404s), m2 has a, and for c a body that is not c.
        server.serve("/m2/\(da)", body: a)
        server.serve("/m2/\(dc)", body: Array("not c".utf8))
        server.serve("/own/a", body: a)
        server.serve("/own/b", body: b)
        server.serve("/own/c", body: c)
        try spool.drop("hashed", """
            header: Authorization: Bearer for-own-server-only
            url: \(server.url("/own/a"))
            sha256: \(da)
            url: \(server.url("/own/b"))
            sha256: \(db)
            url: \(server.url("/own/c"))
            sha256: \(dc)
            url: \(server.url("/own/plain"))
            """)
        server.serve("/own/plain", body: Array("no sha256: no mirror".utf8))
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--store", "yes", "--max-attempts", "1",
            "--hashed-mirror", server.url("/m1/{sha256}"), "--hashed-mirror", server.url("/m2/{sha256}")])
        XCTAssertEqual(status, 0, stderr)
        for d in [da, db, dc] {
            XCTAssertEqual(server.requests(for: "/m1/\(d)").count, 1, "the first mirror is asked first")
            XCTAssertEqual(server.requests(for: "/m2/\(d)").count, 1, "then the second")
        }
        XCTAssertEqual(server.requests(for: "/own/a").count, 0, "the mirror served a: its own URL never asked")
        XCTAssertEqual(server.requests(for: "/own/b").count, 1)
        XCTAssertEqual(server.requests(for: "/own/c").count, 1, "a wrong body from a mirror falls through")
        XCTAssertEqual(server.requests(for: "/own/plain").count, 1)
        XCTAssertEqual(server.allRequests.filter { $0.path.hasPrefix("/m") }.count, 6, "no mirror for an item without sha256")
        for request in server.allRequests where request.path.hasPrefix("/m") {
            XCTAssertNil(request.header("Authorization"), "the item's headers are for its own server only")
        }
        for (name, body) in [("a", a), ("b", b), ("c", c)] {
            XCTAssertEqual(try spool.read("final", name), body)
            XCTAssertEqual(try json("final", "\(name).done")["attempts"] as? Int, 1, "falling through spent no attempt")
        }
        XCTAssertEqual(try json("final", "a.done")["finalURL"] as? String, server.url("/m2/\(da)"), "finalURL: where it came from")
        for d in [da, db, dc] { XCTAssertTrue(FileManager.default.fileExists(atPath: storeEntry(d))) }
    }

    func testAHashedMirrorWithoutTheStoreIsRefused() throws {
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--hashed-mirror", server.url("/m/{sha256}")])
        XCTAssertEqual(status, 3, stderr)
        XCTAssertTrue(stderr.contains("--hashed-mirror needs the content store"), stderr)
        let (bad, badErr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes", "--hashed-mirror", server.url("/m/plain")])
        XCTAssertEqual(bad, 64, badErr)
        XCTAssertTrue(badErr.contains("must contain {sha256}"), badErr)
    }

    // MARK: Bounded, listed, verified

    /// `spoolfetch ARGS`: exit status and standard output.
    private func client(_ arguments: [String]) throws -> (status: Int32, out: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: DaemonProcess.executablePath)
        p.arguments = arguments
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: out, as: UTF8.self))
    }

    private func storeSummary() throws -> [String: Any] {
        let r = try client(["store", "--json", "--spool", spool.root])
        XCTAssertEqual(r.status, 0, r.out)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], r.out)
    }

    func testStoreMaxRemovesTheLeastRecentlyUsedAndStoreListsEntriesSizeAndHits() throws {
        let bodies = (0..<2).map { TestBody.random(count: 30_000, seed: UInt64(30 + $0)) }
        let digests = bodies.map(TestBody.sha256Hex)
        server.serve("/x0", body: bodies[0])
        server.serve("/x1", body: bodies[1])
        let flags = ["--store", "yes", "--store-max", "50000"]
        try spool.drop("one", "url: \(server.url("/x0"))\nname: one\nsha256: \(digests[0])\n")
        var (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: flags)
        XCTAssertEqual(status, 0, stderr)
        try spool.drop("two", "url: \(server.url("/x1"))\nname: two\nsha256: \(digests[1])\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: flags)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: storeEntry(digests[0])), "60000 > 50000: the older entry went")
        XCTAssertTrue(FileManager.default.fileExists(atPath: storeEntry(digests[1])))
        var summary = try storeSummary()
        XCTAssertEqual(summary["entries"] as? Int, 1)
        XCTAssertEqual(summary["bytes"] as? Int, 30_000)
        XCTAssertEqual(summary["hits"] as? Int, 0)
        // A hit on the one kept; the evicted one is fetched again.
        try spool.drop("three", "url: \(server.url("/x1"))\nname: three\nsha256: \(digests[1])\n")
        try spool.drop("four", "url: \(server.url("/x0"))\nname: four\nsha256: \(digests[0])\n")
        (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: flags)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/x1").count, 1, "a hit")
        XCTAssertEqual(server.requests(for: "/x0").count, 2, "evicted: fetched again")
        XCTAssertEqual(try spool.read("final", "three"), bodies[1])
        XCTAssertEqual(try spool.read("final", "four"), bodies[0])
        summary = try storeSummary()
        XCTAssertEqual(summary["entries"] as? Int, 1, "still within 50000")
        XCTAssertEqual(summary["hits"] as? Int, 1)
        XCTAssertEqual(summary["bytesSaved"] as? Int, 30_000)
        let line = try client(["store", "--spool", spool.root])
        XCTAssertTrue(line.out.contains("1 entries") && line.out.contains("1 hits"), line.out)
    }

    func testStoreVerifyRemovesAndReportsAnEntryWhoseBytesChanged() throws {
        let good = TestBody.random(count: 9_000, seed: 40), bad = TestBody.random(count: 9_000, seed: 41)
        server.serve("/good", body: good)
        server.serve("/bad", body: bad)
        try spool.drop("v", """
            url: \(server.url("/good"))
            sha256: \(TestBody.sha256Hex(good))
            url: \(server.url("/bad"))
            sha256: \(TestBody.sha256Hex(bad))
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try client(["store", "verify", "--spool", spool.root]).status, 0)
        let rotten = storeEntry(TestBody.sha256Hex(bad))
        chmod(rotten, 0o644)
        var changed = bad
        changed[100] ^= 0xff
        try Data(changed).write(to: URL(fileURLWithPath: rotten))
        let r = try client(["store", "verify", "--spool", spool.root])
        XCTAssertEqual(r.status, 1, r.out)
        XCTAssertTrue(r.out.contains("removed sha256/\(TestBody.sha256Hex(bad).prefix(2))/\(TestBody.sha256Hex(bad))"), r.out)
        XCTAssertTrue(r.out.contains("hash to \(TestBody.sha256Hex(changed))"), r.out)
        XCTAssertTrue(r.out.contains("checked 2 entries: 1 removed"), r.out)
        XCTAssertFalse(FileManager.default.fileExists(atPath: rotten))
        XCTAssertTrue(FileManager.default.fileExists(atPath: storeEntry(TestBody.sha256Hex(good))))
        XCTAssertEqual(try client(["store", "verify", "--spool", spool.root]).status, 0)
    }

    // MARK: Reflinks

    /// On xfs with reflink (an image made and loop-mounted here): a hit is a reflink — the
    /// published file shares the entry's blocks, no data copied — and a copy of its own.
    func testOnXfsWithReflinkAHitIsAReflink() throws {
        let scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-xfs-store")
        let image = scratch + "/xfs.img", mount = scratch + "/mnt"
        defer {
            _ = try? PowerCutMount.runTool("/usr/bin/umount", [mount])
            try? FileManager.default.removeItem(atPath: scratch)
        }
        guard geteuid() == 0 else { throw MountUnavailable("loop-mounting an xfs image needs root (CI runs as root)") }
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: image, contents: nil))
        XCTAssertEqual(truncate(image, 512 << 20), 0)
        guard try PowerCutMount.runTool("/usr/sbin/mkfs.xfs", ["-q", "-m", "reflink=1", image]) == 0 else {
            throw MountUnavailable("mkfs.xfs failed (xfsprogs is in the Makefile's TEST_PACKAGES)")
        }
        guard try PowerCutMount.runTool("/usr/bin/mount", ["-o", "loop", image, mount]) == 0 else {
            throw MountUnavailable("mount -o loop of an xfs image failed: no loop device here?")
        }
        let xfsSpool = try TempSpool(root: mount + "/spool")
        let body = TestBody.random(count: 3 << 20, seed: 80)
        let digest = TestBody.sha256Hex(body)
        server.serve("/r.bin", body: body)
        try xfsSpool.drop("first", "url: \(server.url("/r.bin"))\nsha256: \(digest)\n")
        var (status, stderr) = try DaemonProcess.drain(spool: xfsSpool.root, extra: ["--store", "yes"])
        XCTAssertEqual(status, 0, stderr)
        try xfsSpool.drop("second", "url: \(server.url("/r.bin"))\nname: r2.bin\nsha256: \(digest)\n")
        (status, stderr) = try DaemonProcess.drain(spool: xfsSpool.root, extra: ["--store", "yes", "--log-level", "debug"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/r.bin").count, 1)
        XCTAssertEqual(try xfsSpool.read("final", "r2.bin"), body)
        XCTAssertTrue(stderr.contains("published from the store") && stderr.contains("copy=reflink"), stderr)
        // Its own inode, sharing the entry's blocks (filefrag marks them "shared").
        let frag = Process()
        frag.executableURL = URL(fileURLWithPath: "/usr/sbin/filefrag")
        frag.arguments = ["-v", xfsSpool.path("final", "r2.bin")]
        let pipe = Pipe()
        frag.standardOutput = pipe
        try frag.run()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        frag.waitUntilExit()
        XCTAssertTrue(text.contains("shared"), text)
        var published = stat(), entry = stat()
        XCTAssertEqual(stat(xfsSpool.path("final", "r2.bin"), &published), 0)
        XCTAssertEqual(stat(xfsSpool.root + "/store/" + "sha256/" + digest.prefix(2) + "/" + digest, &entry), 0)
        XCTAssertNotEqual(published.st_ino, entry.st_ino)
    }
}
