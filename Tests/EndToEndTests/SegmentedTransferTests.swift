import Foundation
import NIOCore
import SpoolTestSupport
import XCTest

/// Large bodies from a server that caps each connection: several ranges over several
/// connections into one part, and the promises per segment (`If-Range` with the one validator,
/// nothing spliced from a response that is not the asked range of that version).
final class SegmentedTransferTests: SpoolTestCase {
    private let size = 24 << 20
    /// About 6.4 MB/s per connection: one stream needs about 4 s for the body.
    private let capped = ResponseBehavior.slow(chunkSize: 64 << 10, interval: .milliseconds(10))

    private func marker(_ name: String) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try spool.read("final", name + ".done"))) as? [String: Any])
    }

    private func drain(_ extra: [String] = []) throws {
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: extra, timeout: 120)
        XCTAssertEqual(status, 0, stderr)
    }

    func testALargeItemUsesSeveralConnectionsAndPublishesAByteIdenticalFile() throws {
        let body = TestBody.random(count: size, seed: 42)
        server.serve("/big.bin", body: body, etag: "\"v1\"", script: [capped])
        try spool.drop("big", server.url("/big.bin") + "\n")
        try drain()
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "big.bin")), TestBody.sha256Hex(body), "big.bin byte-identical")
        let done = try marker("big.bin")
        XCTAssertEqual(done["sha256"] as? String, TestBody.sha256Hex(body))
        XCTAssertEqual(done["connections"] as? Int, 6, "a lone large file uses the host's six connections")
        let requests = server.requests(for: "/big.bin")
        let ranged = requests.filter { $0.header("Range") != nil }
        XCTAssertGreaterThanOrEqual(ranged.count, 5)
        XCTAssertTrue(ranged.allSatisfy { $0.header("If-Range") == "\"v1\"" }, "every range names the one validator")
        XCTAssertGreaterThanOrEqual(Set(requests.map(\.connectionID)).count, 6, "on connections of their own")
        XCTAssertLessThanOrEqual(server.bodyBytesSent, size * 12 / 10, "the ranges do not overlap much")
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    /// Every segment asks a closed range (`bytes=a-b`): the server sends the file and at most
    /// 2 % more, work stealing and the primary's cut included (counted by the server itself).
    func testSegmentsAskClosedRangesAndTheServerSendsAtMostTwoPercentMore() throws {
        let body = TestBody.random(count: size, seed: 55)
        server.serve("/exact.bin", body: body, etag: "\"v1\"", script: [capped])
        try spool.drop("exact", server.url("/exact.bin") + "\n")
        try drain()
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "exact.bin")), TestBody.sha256Hex(body), "exact.bin byte-identical")
        XCTAssertGreaterThan(try marker("exact.bin")["connections"] as? Int ?? 1, 1, "fetched in segments")
        let ranges = server.requests(for: "/exact.bin").compactMap { $0.header("Range") }
        XCTAssertGreaterThanOrEqual(ranges.count, 2)
        for range in ranges {
            let spec = range.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
            XCTAssertTrue(range.hasPrefix("bytes=") && spec.count == 2 && Int(spec[1]) != nil, "a closed range: \(range)")
        }
        XCTAssertLessThanOrEqual(server.bodyBytesSent, size + size / 50,
                                 "the server sent \(server.bodyBytesSent) bytes for a file of \(size)")
    }

    /// kill -9 with `--sync-every 1M`: every range the state recorded as durable is kept by the
    /// restart (no range request asks for any of its bytes again), not only the in-order prefix.
    func testKillNineKeepsEveryDurableRange() throws {
        let body = TestBody.random(count: size, seed: 56)
        server.serve("/durable.bin", body: body, etag: "\"v1\"",
                     script: [.slow(chunkSize: 32 << 10, interval: .milliseconds(20))])
        try spool.drop("durable", server.url("/durable.bin") + "\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root, "--sync-every", "1M"])
        var recorded: [[Int]] = []
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 60, what: "a state with three ranges durable in part") {
            guard let name = self.spool.files(in: "staging").first(where: { $0.hasSuffix(".state") }),
                  let bytes = try? self.spool.read("staging", name),
                  let state = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                  let ranges = state["ranges"] as? [[Int]] else { return false }
            recorded = ranges.filter { $0.count == 4 && $0[3] > $0[0] }
            return recorded.count >= 3
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        let before = server.requests(for: "/durable.bin").count
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "durable.bin")), TestBody.sha256Hex(body))
        let asked = server.requests(for: "/durable.bin").dropFirst(before).map { $0.header("Range") ?? "bytes=0-" }
        XCTAssertFalse(asked.isEmpty)
        for range in asked {
            let spec = range.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
            guard spec.count == 2, let from = Int(spec[0]) else { XCTFail("unexpected range \(range)"); continue }
            let last = Int(spec[1]) ?? size - 1
            for r in recorded {
                XCTAssertFalse(from < r[3] && last >= r[0], "\(range) asks again for durable bytes \(r[0])..<\(r[3])")
            }
        }
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    /// kill -9 while ranges are being written past the in-order prefix: the restart builds only
    /// on the synced prefix, and the published file has no hole.
    func testKillNineMidSegmentedTransferPublishesTheWholeFile() throws {
        let body = TestBody.random(count: size, seed: 49)
        server.serve("/crash.bin", body: body, etag: "\"v1\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(20))])
        try spool.drop("crash", server.url("/crash.bin") + "\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root, "--sync-every", "4M"])
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "a segmented state and ranges past the middle") {
            let state = self.spool.files(in: "staging").first { $0.hasSuffix(".state") }
                .flatMap { try? self.spool.read("staging", $0) }.map { String(decoding: $0, as: UTF8.self) } ?? ""
            return state.contains("\"segments\"") && self.partSize() > self.size / 2
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "crash.bin")), TestBody.sha256Hex(body), "crash.bin byte-identical")
        XCTAssertEqual(try marker("crash.bin")["sha256"] as? String, TestBody.sha256Hex(body))
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    /// Fair shares: a small item of the host that arrives while a segmented body holds all six
    /// connections gets one at once, not when a range finishes. Its ranges all end near the end
    /// of the body, so a small item that waited behind them would be published only when the
    /// server had sent nearly all of it; here it is published while less than two thirds was
    /// sent, and the cut range is fetched afterwards from where it stopped.
    func testASmallItemOfTheHostIsPublishedWhileTheSegmentedBodyStillRuns() throws {
        let body = TestBody.random(count: size, seed: 57)
        // About 640 KB/s per connection: six need about 6 s for the body.
        server.serve("/big.bin", body: body, etag: "\"v1\"", script: [.slow(chunkSize: 32 << 10, interval: .milliseconds(50))])
        server.serve("/small.bin", body: Array("small".utf8))
        try spool.drop("big", server.url("/big.bin") + "\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 60, what: "the big body on six connections") {
            self.server.requests(for: "/big.bin").count >= 6
                && (self.spool.files(in: "staging").first { $0.hasSuffix(".state") }
                    .flatMap { try? self.spool.read("staging", $0) }.map { String(decoding: $0, as: UTF8.self) } ?? "").contains("\"segments\"")
        }
        XCTAssertLessThan(server.bodyBytesSent, size / 3, "the small item arrives early in the big body")
        let rangesBefore = server.requests(for: "/big.bin").count
        try spool.drop("small", server.url("/small.bin") + "\n")
        try DirectoryWaiter.waitForFile("small.bin.done", in: spool.path("final"), timeout: 60)
        let sentWhenSmallWasPublished = server.bodyBytesSent
        XCTAssertFalse(spool.files(in: "final").contains("big.bin.done"), "the big body still runs")
        XCTAssertLessThan(sentWhenSmallWasPublished, size * 2 / 3,
                          "published after \(sentWhenSmallWasPublished) of \(size) bytes: it waited behind the segments")
        try DirectoryWaiter.waitForFile("big.bin.done", in: spool.path("final"), timeout: 90)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "big.bin")), TestBody.sha256Hex(body), "big.bin byte-identical")
        XCTAssertEqual(try marker("big.bin")["connections"] as? Int, 6)
        // The range given up was asked again from where it stopped, under the same validator.
        let later = server.requests(for: "/big.bin").dropFirst(rangesBefore)
        XCTAssertFalse(later.isEmpty, "the cut range is fetched after the small item")
        XCTAssertTrue(later.allSatisfy { $0.header("If-Range") == "\"v1\"" && $0.header("Range") != nil })
        XCTAssertTrue(daemon.stderrText.contains("segments yielded"), daemon.stderrText)
        XCTAssertLessThanOrEqual(server.bodyBytesSent, size + size / 10, "what was written is not fetched again")
    }

    /// `--max-rate` is one bucket for every connection: segments do not multiply it.
    func testMaxRateHoldsAcrossSegments() throws {
        let body = TestBody.random(count: size, seed: 52)
        server.serve("/rated.bin", body: body, etag: "\"v1\"", script: [capped])
        try spool.drop("rated", server.url("/rated.bin") + "\n")
        let started = Date()
        try drain(["--max-rate", "8M"])
        let seconds = Date().timeIntervalSince(started)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "rated.bin")), TestBody.sha256Hex(body))
        XCTAssertGreaterThan(try marker("rated.bin")["connections"] as? Int ?? 1, 1)
        XCTAssertGreaterThanOrEqual(seconds, 2.5, "24 MiB at 8 MiB/s takes 3 s, whatever the connections")
    }

    /// Over HTTP/2 (nginx, TLS) the item's own transfer is a stream of the host's connection and
    /// each segment a connection of its own; the file is whole and the host stays HTTP/2.
    func testSegmentsAgainstAnHTTP2Host() throws {
        let certDir = spool.path("tmp", "certs")
        try FileManager.default.createDirectory(atPath: certDir, withIntermediateDirectories: true)
        let certs = try TestCertificates(in: certDir)
        let www = spool.path("tmp", "www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        let body = TestBody.random(count: 20 << 20, seed: 53)
        try Data(body).write(to: URL(fileURLWithPath: www + "/h2.bin"))
        let nginx = try NginxServer(root: www, certificate: certs.serverCertificate, key: certs.serverKey, http2: true,
                                    rateLimit: "4m")
        try spool.drop("h2", nginx.url("/h2.bin", scheme: "https") + "\n")
        try drain(["--ca-file", certs.caCertificate])
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "h2.bin")), TestBody.sha256Hex(body))
        XCTAssertEqual(try marker("h2.bin")["connections"] as? Int, 6)
        let log = nginx.requestLog()
        XCTAssertEqual(log.filter { $0.proto == "HTTP/2.0" }.count, 1, "the item's own request, a stream")
        XCTAssertGreaterThanOrEqual(Set(log.filter { $0.proto == "HTTP/1.1" }.map(\.connection)).count, 5,
                                    "the segments, each on a connection of its own")
    }

    /// Status shows a segmented item as one task: its bytes over every range, its connections.
    func testStatusShowsASegmentedItemAsOneTaskWithItsConnections() throws {
        let body = TestBody.random(count: size, seed: 50)
        server.serve("/watched.bin", body: body, etag: "\"v1\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(20))])
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)
        try spool.drop("watched", server.url("/watched.bin") + "\n")
        var seen: [String: Any]?
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "a status report with a segmented task") {
            for name in self.spool.files(in: "status") where name.hasSuffix(".json") {
                guard let bytes = try? self.spool.read("status", name),
                      let report = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                      let tasks = report["tasks"] as? [[String: Any]] else { continue }
                let mine = tasks.filter { ($0["id"] as? String)?.hasPrefix("watched#") == true }
                if mine.count == 1, (mine[0]["connections"] as? Int ?? 0) > 1 { seen = mine[0]; return true }
            }
            return false
        }
        let task = try XCTUnwrap(seen)
        XCTAssertEqual(task["state"] as? String, "running")
        XCTAssertLessThanOrEqual(task["connections"] as? Int ?? 0, 6, "never more than --per-host")
        XCTAssertEqual(task["expected"] as? Int, size)
        XCTAssertGreaterThan(task["bytes"] as? Int ?? 0, 0)
        try DirectoryWaiter.waitForFile("watched.group.done", in: spool.path("final"), timeout: 60)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "watched.bin")), TestBody.sha256Hex(body))
    }

    /// kill -9 mid-transfer, restart in the same boot: every range resumes from what its
    /// connection had written (the state says, at most 250 ms old), not from byte 0.
    func testKillNineMidSegmentedTransferResumesEveryRange() throws {
        let body = TestBody.random(count: size, seed: 54)
        server.serve("/ranges.bin", body: body, etag: "\"v1\"",
                     script: [.slow(chunkSize: 32 << 10, interval: .milliseconds(20))])
        try spool.drop("ranges", server.url("/ranges.bin") + "\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root])
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 60, what: "a state with ranges half done") {
            guard let name = self.spool.files(in: "staging").first(where: { $0.hasSuffix(".state") }),
                  let bytes = try? self.spool.read("staging", name),
                  let state = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                  let ranges = state["ranges"] as? [[Int]], let prefix = state["bytes"] as? Int else { return false }
            let done = prefix + ranges.reduce(0) { $0 + ($1[1] - $1[0]) }
            return done > self.size / 2
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        let sentBefore = server.bodyBytesSent
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "ranges.bin")), TestBody.sha256Hex(body))
        XCTAssertEqual(try marker("ranges.bin")["sha256"] as? String, TestBody.sha256Hex(body))
        let resumed = server.requests(for: "/ranges.bin").dropFirst(6).compactMap { $0.header("Range") }
        XCTAssertGreaterThanOrEqual(resumed.count, 2, "the restart resumed ranges")
        XCTAssertLessThanOrEqual(server.bodyBytesSent, size * 12 / 10,
                                 "the server sent at most 1.2 x the file in all (\(sentBefore) before the kill)")
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    /// A power cut (the volatile-disk fixture: every byte not synced is lost) after a kill -9
    /// in the middle of a segmented transfer: the restart publishes a whole file, and after
    /// another cut its marker still describes it.
    func testPowerCutMidSegmentedTransferLeavesOnlyWholeFilesUnderMarkers() throws {
        let scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-fuse-segments")
        let fs = try PowerCutMount(in: scratch)
        defer {
            try? fs.unmount()
            if ProcessInfo.processInfo.environment["SPOOLFETCH_KEEP_TEST_DIRS"] == nil {
                try? FileManager.default.removeItem(atPath: scratch)
            }
        }
        let fuseSpool = try TempSpool(root: fs.mountPoint + "/spool")
        let body = TestBody.random(count: size, seed: 51)
        server.serve("/cut.bin", body: body, etag: "\"v1\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(20))])
        try fuseSpool.drop("cut", server.url("/cut.bin") + "\n")
        let first = try DaemonProcess.launch(["run", "--spool", fuseSpool.root, "--sync-every", "4M"])
        try DirectoryWaiter.wait(in: fuseSpool.path("staging"), timeout: 60, what: "a segmented state and ranges past the middle") {
            self.segmentedState(in: fuseSpool) && self.partSize(in: fuseSpool) > self.size / 2
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        try fs.powerCut()
        let (status, stderr) = try DaemonProcess.drain(spool: fuseSpool.root, timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        for context in ["after the restart", "after a second power cut"] {
            if context != "after the restart" { try fs.powerCut() }
            let published = try fuseSpool.read("final", "cut.bin")
            let marker = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try fuseSpool.read("final", "cut.bin.done"))) as? [String: Any])
            XCTAssertEqual(marker["sha256"] as? String, TestBody.sha256Hex(published), context)
            XCTAssertEqual(TestBody.sha256Hex(published), TestBody.sha256Hex(body), context)
        }
    }

    private func segmentedState(in spool: TempSpool) -> Bool {
        spool.files(in: "staging").contains { name in
            name.hasSuffix(".state")
                && (try? spool.read("staging", name)).map { String(decoding: $0, as: UTF8.self).contains("\"segments\"") } == true
        }
    }

    private func partSize(in spool: TempSpool? = nil) -> Int {
        let spool = spool ?? self.spool!
        for name in spool.files(in: "staging") where name.hasSuffix(".part") {
            return (try? FileManager.default.attributesOfItem(atPath: spool.path("staging", name))[.size] as? Int) ?? 0
        }
        return 0
    }

    /// kill -9 mid-way, and the resource changes before the restart: the resume's `If-Range`
    /// gets the new version whole (a 200), the kept ranges are forgotten, and the new body is
    /// split into segments again rather than fetched over one connection.
    func testABodyThatStartsOverAfterARestartIsSegmentedAgain() throws {
        let old = TestBody.random(count: size, seed: 57)
        let new = TestBody.random(count: size, seed: 58)
        server.serve("/moving.bin", body: old, etag: "\"old\"", script: [.slow(chunkSize: 32 << 10, interval: .milliseconds(20))])
        try spool.drop("moving", server.url("/moving.bin") + "\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root])
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 60, what: "a state with ranges") {
            guard let name = self.spool.files(in: "staging").first(where: { $0.hasSuffix(".state") }),
                  let bytes = try? self.spool.read("staging", name),
                  let state = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                  let ranges = state["ranges"] as? [[Int]] else { return false }
            return ranges.contains { $0[1] - $0[0] > 1 << 20 }
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        server.serve("/moving.bin", body: new, etag: "\"new\"", script: [capped])
        try drain()
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "moving.bin")), TestBody.sha256Hex(new), "the new version, whole")
        let done = try marker("moving.bin")
        XCTAssertEqual(done["sha256"] as? String, TestBody.sha256Hex(new))
        XCTAssertGreaterThan(done["connections"] as? Int ?? 1, 1, "the new body came in segments")
    }

    func testSegmentsOffGivesOneStream() throws {
        let body = TestBody.random(count: size, seed: 43)
        server.serve("/one.bin", body: body, etag: "\"v1\"", script: [.slow(chunkSize: 1 << 20, interval: .milliseconds(10))])
        try spool.drop("one", server.url("/one.bin") + "\n")
        try drain(["--max-segments", "1"])
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "one.bin")), TestBody.sha256Hex(body), "one.bin byte-identical")
        XCTAssertNil(try marker("one.bin")["connections"])
        XCTAssertEqual(server.requests(for: "/one.bin").count, 1)
    }

    func testTheRequestKeyBoundsTheConnectionsOfItsItem() throws {
        let body = TestBody.random(count: size, seed: 48)
        server.serve("/three.bin", body: body, etag: "\"v1\"", script: [capped])
        try spool.drop("three", server.url("/three.bin") + "\nsegments: 3\n")
        try drain()
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "three.bin")), TestBody.sha256Hex(body), "three.bin byte-identical")
        XCTAssertEqual(try marker("three.bin")["connections"] as? Int, 3)
    }

    func testAServerThatIgnoresRangeForSomeRequestsGivesTheRightFileOverOneStream() throws {
        let body = TestBody.random(count: size, seed: 44)
        server.serve("/mixed.bin", body: body, etag: "\"v1\"", script: [capped, .ignoreRange, capped])
        try spool.drop("mixed", server.url("/mixed.bin") + "\n")
        try drain()
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "mixed.bin")), TestBody.sha256Hex(body), "mixed.bin byte-identical")
        let done = try marker("mixed.bin")
        XCTAssertEqual(done["sha256"] as? String, TestBody.sha256Hex(body))
        XCTAssertNil(done["connections"], "published from the one stream")
        XCTAssertEqual(server.requests(for: "/mixed.bin").first?.header("Range"), nil)
    }

    func testAResourceThatChangesBetweenSegmentsIsNotSpliced() throws {
        let old = TestBody.random(count: size, seed: 45)
        let new = TestBody.random(count: size, seed: 46)
        // The first request gets the old version; every later one the new, under another ETag,
        // from a server that ignores If-Range (a 206 of the new version).
        server.serve("/changing.bin", body: old, etag: "\"old\"",
                     script: [capped, .version(body: new, etag: "\"new\"")])
        try spool.drop("changing", server.url("/changing.bin") + "\n")
        try drain()
        let published = try spool.read("final", "changing.bin")
        XCTAssertTrue(published == old || published == new, "one whole version")
        XCTAssertEqual(try marker("changing.bin")["sha256"] as? String, TestBody.sha256Hex(published))
        XCTAssertNil(try marker("changing.bin")["connections"])
    }

    func testALoneLargeFileBesideSmallOnesOfTheHostDoesNotStarveThem() throws {
        let body = TestBody.random(count: size, seed: 47)
        server.serve("/large.bin", body: body, etag: "\"v1\"", script: [capped])
        var text = server.url("/large.bin") + "\n"
        for i in 0..<20 {
            server.serve("/s\(i)", body: TestBody.random(count: 4096, seed: UInt64(100 + i)), script: [.delayed(.milliseconds(20))])
            text += server.url("/s\(i)") + "\n"
        }
        try spool.drop("mix", text)
        try drain()
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "large.bin")), TestBody.sha256Hex(body), "large.bin byte-identical")
        for i in 0..<20 { XCTAssertEqual(try spool.read("final", "s\(i)"), TestBody.random(count: 4096, seed: UInt64(100 + i))) }
        XCTAssertLessThanOrEqual(server.maxConcurrentDelayed, 5, "the large file holds one of the six connections")
        XCTAssertGreaterThan(server.maxConcurrentDelayed, 1)
        let small = try (0..<20).map { try marker("s\($0)")["finishedAt"] as? String ?? "" }.max() ?? ""
        let large = try marker("large.bin")["finishedAt"] as? String ?? ""
        XCTAssertLessThanOrEqual(small, large, "the small ones were not kept waiting behind it")
        XCTAssertGreaterThan(try marker("large.bin")["connections"] as? Int ?? 1, 1, "then it took the free connections")
    }
}
