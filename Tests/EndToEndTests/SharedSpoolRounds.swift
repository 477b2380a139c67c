import Foundation
import SpoolTestSupport
import XCTest

/// The rounds of workers sharing one spool through several mounts (two machines, or ten), shared
/// by the bindfs and GlusterFS tests: a batch of requests dropped through the first mount, the
/// workers' logs to wait on, and the checks that every file was published once with its marker
/// and every request filed once.
final class SharedSpoolRounds {
    let server: TestHTTPServer
    private(set) var bodies: [String: [UInt8]] = [:]
    /// The lease settings every worker of a round runs with (short, so a round takes seconds).
    static let leasePeriod = 1.0
    static let leaseTimeout = 4.0

    init(server: TestHTTPServer) { self.server = server }

    /// `requests` request files of `items` URLs each (64 KiB bodies), dropped through `producer`
    /// as a producer does (write in tmp/, fsync, rename).
    func dropBatch(_ producer: TempSpool, requests: Int, items: Int, from first: Int = 0) throws {
        for r in first..<requests {
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

    /// A worker on `spool`. `otherMachine`: in a pid namespace of its own, so that it cannot
    /// tell from a lease that the process which wrote it is gone (as a worker on another machine
    /// cannot): only the lease's age decides.
    func worker(_ spool: String, otherMachine: Bool = false) throws -> DaemonProcess {
        let arguments = ["run", "--spool", spool, "--inotify", "no", "--rescan-interval", "1",
                         "--adopt-interval", "1", "--lease-period", "\(Self.leasePeriod)",
                         "--lease-timeout", "\(Self.leaseTimeout)", "--log-level", "info"]
        return otherMachine ? try DaemonProcess.launch(inNewPIDNamespace: arguments) : try DaemonProcess.launch(arguments)
    }

    /// Waits until `count` requests have ended (filed in done/), woken by any worker's log.
    func waitForEnded(_ count: Int, in spool: TempSpool, workers: [DaemonProcess], timeout: Double) throws {
        try DirectoryWaiter.wait(inAny: workers.map(\.outputDirectory), timeout: timeout,
                                 what: "\(count) requests in done/ (\(spool.files(in: "done").count) so far)") {
            spool.files(in: "done").count >= count
        }
    }

    /// How often `text` appears in a worker's log.
    static func count(_ text: String, in worker: DaemonProcess) -> Int {
        worker.stderrText.components(separatedBy: text).count - 1
    }

    /// Waits for `worker` to log an adoption beyond the `before` it had logged; the seconds since `from`.
    func waitForAdoption(by worker: DaemonProcess, before: Int, since from: Date, timeout: Double) throws -> Double {
        try worker.waitForStderr(timeout: timeout, what: "an adoption of the stopped worker's requests") {
            $0.components(separatedBy: "adopting the requests of workers that are gone").count - 1 > before
        }
        return Date().timeIntervalSince(from)
    }

    /// Every file published once, whole, with its marker; every request filed once in done/.
    func assertPublishedOnce(_ spool: TempSpool, requests: Int, file: StaticString = #filePath, line: UInt = #line) throws {
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
    func report(_ spool: TempSpool) -> String {
        let final = spool.files(in: "final")
        let published = bodies.keys.filter { final.contains($0) && final.contains($0 + ".done") }.count
        let duplicates = final.filter { !$0.hasSuffix(".done") && !$0.hasPrefix(".") && bodies[$0] == nil }.count
        let twice = bodies.keys.filter { server.requests(for: "/g/" + $0).count > 1 }.count
        return "published \(published) of \(bodies.count), duplicates \(duplicates), URLs fetched twice \(twice)"
    }

    /// Round 1: both workers run to the end; every URL fetched once.
    func twoWorkers(first: String, second: String, label: String) throws {
        let producer = try TempSpool(root: first + "/spool")
        let a = try worker(first + "/spool")
        defer { a.terminate() }
        let b = try worker(second + "/spool", otherMachine: true)
        defer { b.terminate() }
        try a.waitForStderr(containing: "spoolfetch running", timeout: 60)
        try b.waitForStderr(containing: "spoolfetch running", timeout: 60)
        try dropBatch(producer, requests: 50, items: 10)
        try waitForEnded(50, in: producer, workers: [a, b], timeout: 300)
        a.signal(SIGTERM)
        b.signal(SIGTERM)
        XCTAssertEqual(try a.waitForExit(timeout: 60), 0, a.stderrText)
        XCTAssertEqual(try b.waitForExit(timeout: 60), 0, b.stderrText)
        try assertPublishedOnce(producer, requests: 50)
        XCTAssertEqual(bodies.keys.filter { server.requests(for: "/g/" + $0).count != 1 }.sorted(), [], "every URL fetched once")
        XCTAssertEqual(Self.count("adopting the requests", in: a) + Self.count("adopting the requests", in: b), 0,
                       "no live worker was taken for dead")
        print("\(label), two workers: \(report(producer))")
    }

    /// Round 2 (`freeze: false`): the first worker is killed with SIGKILL after 3 group ends; the
    /// second takes its requests over within two lease timeouts. Round 3 (`freeze: true`): it is
    /// stopped (SIGSTOP) instead, until the second has taken its requests over, then thawed: it
    /// finds itself fenced off and stops without committing anything.
    func firstWorkerLost(first: String, second: String, freeze: Bool, label: String) throws {
        let producer = try TempSpool(root: first + "/spool")
        let a = try worker(first + "/spool")
        defer { a.signal(SIGCONT); a.terminate() }
        let b = try worker(second + "/spool", otherMachine: true)
        defer { b.terminate() }
        try a.waitForStderr(containing: "spoolfetch running", timeout: 60)
        try b.waitForStderr(containing: "spoolfetch running", timeout: 60)
        try dropBatch(producer, requests: 50, items: 10)
        try a.waitForStderr(timeout: 120, what: "the first worker to end 3 groups") {
            $0.components(separatedBy: "group ended").count - 1 >= 3
        }
        let adoptionsBefore = Self.count("adopting the requests of workers that are gone", in: b)
        let stoppedAt = Date()
        a.signal(freeze ? SIGSTOP : SIGKILL)
        if !freeze { _ = try a.waitForExit(timeout: 30) }
        let publishedAtStop = Set(producer.files(in: "final").filter { $0.hasSuffix(".bin.done") }.map { String($0.dropLast(5)) })
        let takeover: Double
        do { takeover = try waitForAdoption(by: b, before: adoptionsBefore, since: stoppedAt, timeout: 4 * Self.leaseTimeout) } catch {
            print("second worker's log:\n\(b.stderrText.suffix(6000))\nactive/: \((try? FileManager.default.contentsOfDirectory(atPath: producer.path("active"))) ?? [])")
            throw error
        }
        XCTAssertLessThanOrEqual(takeover, 2 * Self.leaseTimeout, "taken over within two lease timeouts")
        // The second worker cannot see the first's process (another pid namespace): only the
        // lease's age can have told it, so not before the lease ran out.
        XCTAssertGreaterThan(takeover, Self.leaseTimeout - 2 * Self.leasePeriod, "not taken over before the lease ran out")
        if freeze {
            a.signal(SIGCONT)
            let status = try a.waitForExit(timeout: 30)
            XCTAssertEqual(status, 4, "the thawed worker stops as fenced off: \(a.stderrText.suffix(2000))")
            XCTAssertTrue(a.stderrText.contains("fenced off"), String(a.stderrText.suffix(2000)))
        }
        try waitForEnded(50, in: producer, workers: [b], timeout: 300)
        b.signal(SIGTERM)
        XCTAssertEqual(try b.waitForExit(timeout: 60), 0, b.stderrText)
        try assertPublishedOnce(producer, requests: 50)
        for name in bodies.keys.sorted() {
            let count = server.requests(for: "/g/" + name).count
            XCTAssertTrue((1...2).contains(count), "\(name) fetched \(count) times")
            if count == 2 { XCTAssertFalse(publishedAtStop.contains(name), "\(name) was published before the stop, and fetched again") }
        }
        let periods = takeover / Self.leasePeriod
        print("\(label), first worker \(freeze ? "frozen (SIGSTOP) past its lease, then thawed" : "killed (SIGKILL)"): \(report(producer)), "
              + "taken over after \(String(format: "%.1f", takeover)) s = \(String(format: "%.1f", periods)) lease periods "
              + "(lease timeout \(Self.leaseTimeout) s = \(String(format: "%.1f", takeover / Self.leaseTimeout)) lease timeouts)")
    }

    /// Round 4: one worker per mount, all started at the same instant on a spool that already
    /// holds half the batch (so start-ups, first listings and adoption scans race), the other
    /// half dropped once all run (so rescans race for each claim); each URL fetched once.
    func startedTogether(mounts: [String], label: String) throws {
        let producer = try TempSpool(root: mounts[0] + "/spool")
        try dropBatch(producer, requests: 15, items: 5)
        var workers: [DaemonProcess] = []
        defer { for w in workers { w.terminate() } }
        for (i, mount) in mounts.enumerated() { workers.append(try worker(mount + "/spool", otherMachine: i % 2 == 1)) }
        for w in workers { try w.waitForStderr(containing: "spoolfetch running", timeout: 60) }
        try dropBatch(producer, requests: 30, items: 5, from: 15)
        try waitForEnded(30, in: producer, workers: workers, timeout: 300)
        for w in workers { w.signal(SIGTERM) }
        for w in workers { XCTAssertEqual(try w.waitForExit(timeout: 60), 0, w.stderrText) }
        try assertPublishedOnce(producer, requests: 30)
        XCTAssertEqual(bodies.keys.filter { server.requests(for: "/g/" + $0).count != 1 }.sorted(), [], "every URL fetched once")
        let adoptions = workers.map { Self.count("adopting the requests", in: $0) }.reduce(0, +)
        XCTAssertEqual(adoptions, 0, "no live worker was taken for dead")
        let ended = workers.map { Self.count("group ended", in: $0) }
        XCTAssertEqual(ended.reduce(0, +), 30, "30 group ends in all: \(ended)")
        print("\(label), \(mounts.count) workers started together: \(report(producer)), group ends per worker \(ended)")
    }
}
