import Foundation
import SpoolTestSupport
import XCTest

/// Two workers on one spool through two GlusterFS clients — two machines, each with the client
/// caches GlusterFS has by default (a name another client moved away stays visible here for
/// about a second). Every request is claimed by one worker, every file published once with its
/// marker, every URL fetched once: with both workers running, after one is killed with SIGKILL,
/// and across start-ups at the same instant.
final class GlusterSpoolTests: SpoolTestCase {
    private var volume: GlusterVolume!
    private var bodies: [String: [UInt8]] = [:]

    override func setUpWithError() throws {
        try super.setUpWithError()
        volume = try GlusterVolume()
    }

    override func tearDownWithError() throws {
        volume?.unmount()
        volume = nil
        try super.tearDownWithError()
    }

    /// `requests` request files of `items` URLs each (64 KiB bodies), dropped through the first
    /// client as a producer does (write in tmp/, fsync, rename).
    private func dropBatch(_ producer: TempSpool, requests: Int, items: Int) throws {
        for r in 0..<requests {
            var text = ""
            for i in 0..<items {
                let name = String(format: "r%02d-%02d.bin", r, i)
                let body = TestBody.random(count: 64 << 10, seed: UInt64(r * 100 + i + 1))
                bodies[name] = body
                server.serve("/g/" + name, body: body, etag: "\"\(r)-\(i)\"")
                text += "url: \(server.url("/g/" + name))\nname: \(name)\n"
            }
            try producer.drop(String(format: "req%02d", r), text)
        }
    }

    private func worker(_ spool: String, _ extra: [String] = []) throws -> DaemonProcess {
        try DaemonProcess.launch(["run", "--spool", spool, "--inotify", "no", "--rescan-interval", "1",
                                  "--adopt-interval", "2", "--lease-period", "\(SharedSpoolRounds.leasePeriod)",
                                  "--lease-timeout", "\(SharedSpoolRounds.leaseTimeout)", "--log-level", "info"] + extra)
    }

    /// One worker on each client, both running, then 50 requests of 10 URLs dropped through the
    /// first client.
    private func twoWorkersWithABatch() throws -> (producer: TempSpool, a: DaemonProcess, b: DaemonProcess) {
        let producer = try TempSpool(root: volume.first + "/spool")
        let a = try worker(volume.first + "/spool")
        let b: DaemonProcess
        do { b = try worker(volume.second + "/spool") } catch { a.terminate(); throw error }
        do {
            try a.waitForStderr(containing: "spoolfetch running", timeout: 60)
            try b.waitForStderr(containing: "spoolfetch running", timeout: 60)
            try dropBatch(producer, requests: 50, items: 10)
        } catch {
            a.terminate()
            b.terminate()
            throw error
        }
        return (producer, a, b)
    }

    /// Waits until `count` requests have ended (filed in done/), woken by either worker's log.
    private func waitForEnded(_ count: Int, in spool: TempSpool, workers: [DaemonProcess], timeout: Double) throws {
        try DirectoryWaiter.wait(inAny: workers.map(\.outputDirectory), timeout: timeout,
                                 what: "\(count) requests in done/ (\(spool.files(in: "done").count) so far)") {
            spool.files(in: "done").count >= count
        }
    }

    /// Every file published once, whole, with its marker; every request filed once in done/.
    private func assertPublishedOnce(_ spool: TempSpool, requests: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        // A killed worker may leave a marker's temp file (`.NAME.done.tmp`): consumers ignore
        // dotfiles, and the next start that finds no other worker alive sweeps them.
        let final = spool.files(in: "final").filter { !($0.hasPrefix(".") && $0.hasSuffix(".tmp")) }
        let expected = Set(bodies.keys.flatMap { [$0, $0 + ".done"] }
                           + (0..<requests).map { String(format: "req%02d.group.done", $0) })
        XCTAssertEqual(Set(final).subtracting(expected).sorted(), [], "nothing published twice or unexpected", file: file, line: line)
        XCTAssertEqual(expected.subtracting(final).sorted(), [], "every file and marker is there", file: file, line: line)
        for (name, body) in bodies.sorted(by: { $0.key < $1.key }) {
            XCTAssertTrue((try? spool.read("final", name)) == body, "\(name) is whole", file: file, line: line)
        }
        XCTAssertEqual(spool.files(in: "done"), (0..<requests).map { String(format: "req%02d", $0) },
                       "each request filed once, under its own name (no request was claimed twice)", file: file, line: line)
        XCTAssertEqual(spool.files(in: "failed"), [], file: file, line: line)
        XCTAssertEqual(spool.files(in: "rejected"), [], file: file, line: line)
    }

    /// The figures of the shared-spool table: published files, duplicates, URLs fetched twice.
    private func report(_ spool: TempSpool) -> String {
        let final = spool.files(in: "final")
        let published = bodies.keys.filter { final.contains($0) && final.contains($0 + ".done") }.count
        let duplicates = final.filter { !$0.hasSuffix(".done") && bodies[$0] == nil }.count
        let twice = bodies.keys.filter { server.requests(for: "/g/" + $0).count > 1 }.count
        return "published \(published) of \(bodies.count), duplicates \(duplicates), URLs fetched twice \(twice)"
    }

    func testTwoWorkersOnTwoClientsClaimEveryRequestOnceAndFetchEveryURLOnce() throws {
        let (producer, a, b) = try twoWorkersWithABatch()
        defer { a.terminate(); b.terminate() }
        try waitForEnded(50, in: producer, workers: [a, b], timeout: 300)
        a.signal(SIGTERM)
        b.signal(SIGTERM)
        XCTAssertEqual(try a.waitForExit(timeout: 60), 0, a.stderrText)
        XCTAssertEqual(try b.waitForExit(timeout: 60), 0, b.stderrText)
        try assertPublishedOnce(producer, requests: 50)
        let twice = bodies.keys.filter { server.requests(for: "/g/" + $0).count != 1 }.sorted()
        XCTAssertEqual(twice, [], "every URL fetched once")
        print("GlusterFS, two workers: \(report(producer))")
        let endedBy = [a, b].map { $0.stderrText.components(separatedBy: "group ended").count - 1 }
        XCTAssertEqual(endedBy.reduce(0, +), 50, "50 group ends in all (a: \(endedBy[0]), b: \(endedBy[1]))")
    }

    func testAWorkerKilledMidBatchIsAdoptedAndNothingIsPublishedTwice() throws {
        let (producer, a, b) = try twoWorkersWithABatch()
        defer { a.terminate(); b.terminate() }
        try a.waitForStderr(timeout: 120, what: "the first worker to end 3 groups") {
            $0.components(separatedBy: "group ended").count - 1 >= 3
        }
        let killSent = Date()
        a.signal(SIGKILL)
        _ = try a.waitForExit(timeout: 30)
        let killedAt = Date()
        let publishedAtKill = Set(producer.files(in: "final").filter { $0.hasSuffix(".bin.done") }.map { String($0.dropLast(5)) })
        try waitForEnded(50, in: producer, workers: [b], timeout: 300)
        b.signal(SIGTERM)
        XCTAssertEqual(try b.waitForExit(timeout: 60), 0, b.stderrText)
        try assertPublishedOnce(producer, requests: 50)
        // Only what the killed worker had under way is fetched again — transfers in flight, and
        // bodies that had arrived but were not yet published (not durable: fetched anew) —, each
        // once more, after the kill; nothing it had published.
        for name in bodies.keys.sorted() {
            let requests = server.requests(for: "/g/" + name)
            XCTAssertTrue((1...2).contains(requests.count), "\(name) fetched \(requests.count) times")
            guard requests.count == 2 else { continue }
            XCTAssertFalse(publishedAtKill.contains(name), "\(name) was published before the kill, and fetched again")
            XCTAssertLessThan(requests[0].receivedAt, killedAt, "\(name): its first request was the killed worker's")
            XCTAssertGreaterThan(requests[1].receivedAt, killSent, "\(name): fetched again by the adopter, after the kill")
        }
        print("GlusterFS, two workers, the first killed: \(report(producer))")
    }

    /// The first worker frozen (SIGSTOP) past its lease: the second takes its requests over
    /// within two lease timeouts; thawed, the first finds itself fenced off and commits nothing.
    func testAWorkerFrozenPastItsLeaseIsTakenOverAndCommitsNothingAfterTheThaw() throws {
        try SharedSpoolRounds(server: server).firstWorkerLost(first: volume.first, second: volume.second, freeze: true,
                                                               label: "GlusterFS")
    }

    /// The killed round again, timed in lease periods (`SharedSpoolRounds`).
    func testAKilledWorkersRequestsAreTakenOverWithinTwoLeaseTimes() throws {
        try SharedSpoolRounds(server: server).firstWorkerLost(first: volume.first, second: volume.second, freeze: false,
                                                               label: "GlusterFS")
    }

    func testTwoWorkersStartedAtTheSameInstantBothStartTenTimesOver() throws {
        for round in 0..<10 {
            // A fresh, empty spool root each time: the two start-ups also create its folders together.
            let root = "/spool-start-\(round)"
            try FileManager.default.createDirectory(atPath: volume.first + root, withIntermediateDirectories: false)
            let a = try worker(volume.first + root)
            let b = try worker(volume.second + root)
            defer { a.terminate(); b.terminate() }
            do {
                try a.waitForStderr(containing: "spoolfetch running", timeout: 30)
                try b.waitForStderr(containing: "spoolfetch running", timeout: 30)
            } catch {
                XCTFail("round \(round): \(error)\nfirst worker:\n\(a.stderrText)\nsecond worker:\n\(b.stderrText)")
                throw error
            }
            a.signal(SIGTERM)
            b.signal(SIGTERM)
            XCTAssertEqual(try a.waitForExit(timeout: 30), 0, "round \(round): \(a.stderrText)")
            XCTAssertEqual(try b.waitForExit(timeout: 30), 0, "round \(round): \(b.stderrText)")
        }
    }
}
