import Foundation
import SpoolTestSupport
import XCTest

/// `--metrics-file` and `status --metrics` on the real daemon: the text passes `promtool check
/// metrics` (Debian's `prometheus` package), its counters are what the spool shows after a mixed
/// batch, and an idle daemon neither writes it nor wakes up.
final class MetricsTests: SpoolTestCase {
    /// One sample line: its metric name, labels and value.
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// The samples of a Prometheus text document (comments skipped). Label values here hold no
    /// `,`, `"` or `}`, so a split is enough; promtool checks the format itself.
    static func samples(_ text: String) -> [Sample] {
        text.split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...])
            else { return nil }
            let series = line[..<space]
            guard let brace = series.firstIndex(of: "{") else { return Sample(name: String(series), labels: [:], value: value) }
            var labels: [String: String] = [:]
            for pair in series[series.index(after: brace)..<series.index(before: series.endIndex)].split(separator: ",") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                if kv.count == 2 { labels[String(kv[0])] = String(kv[1].dropFirst().dropLast()) }
            }
            return Sample(name: String(series[..<brace]), labels: labels, value: value)
        }
    }

    static func value(_ samples: [Sample], _ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = samples.filter { s in s.name == name && labels.allSatisfy { s.labels[$0.key] == $0.value } }
        return matching.isEmpty ? nil : matching.reduce(0) { $0 + $1.value }
    }

    /// `promtool check metrics` on `text`: its exit status and what it said.
    static func promtool(_ arguments: [String], stdin text: String? = nil) throws -> (status: Int32, output: String) {
        let path = "/usr/bin/promtool"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            XCTFail("promtool is missing: install Debian's prometheus package (listed in the Makefile's TEST_PACKAGES)")
            return (-1, "")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = output
        try p.run()
        if let text { input.fileHandleForWriting.write(Data(text.utf8)) }
        try input.fileHandleForWriting.close()
        let said = output.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: said, as: UTF8.self))
    }

    func testTheMetricsFileParsesAndItsCountersMatchTheSpoolAfterAMixedBatch() throws {
        var sizes = 0
        for i in 0..<3 {
            let body = TestBody.random(count: 1000 * (i + 1), seed: UInt64(60 + i))
            sizes += body.count
            server.serve("/m\(i)", body: body)
        }
        try spool.drop("good", (0..<3).map { server.url("/m\($0)") }.joined(separator: "\n") + "\n")
        try spool.drop("missing", server.url("/nothing-here") + "\n")
        try spool.drop("bad", "just some words\n")
        let gone = try TestHTTPServer.start()
        let port = gone.port
        try gone.shutdown()
        try spool.drop("down", "http://127.0.0.1:\(port)/x\n")
        let folder = spool.root + "/collector"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/spoolfetch.prom"
        let launched = Date()
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--metrics-file", path, "--metrics-interval", "1",
                                               "--adopt-interval", "0"])
        defer { daemon.terminate() }
        try DirectoryWaiter.waitForFile("good.group.done", in: spool.path("final"), timeout: 30)
        try DirectoryWaiter.waitForFile("missing.error", in: spool.path("failed"), timeout: 30)
        try DirectoryWaiter.waitForFile("bad.error", in: spool.path("rejected"), timeout: 30)
        try daemon.waitForStderr(containing: "host unreachable; its items wait", timeout: 30)

        // What the spool shows.
        let published = spool.files(in: "final").filter { $0.hasSuffix(".done") && !$0.hasSuffix(".group.done") }.count
        let failedItems = try spool.files(in: "failed").filter { $0.hasSuffix(".error") }
            .flatMap { try XCTUnwrap(json("failed", $0)["items"] as? [[String: Any]]) }
        let rejected = spool.files(in: "rejected").filter { $0.hasSuffix(".error") }.count
        XCTAssertEqual([published, failedItems.count, rejected], [3, 1, 1])
        let worker = "\(ProcessInfo.processInfo.hostName)-\(daemon.pid)"

        // The metrics file catches up within its interval; waited for on its folder. The outage's
        // item is queued between its host's probes (during a probe it runs, and no item is
        // queued): waited for too.
        var text = ""
        try DirectoryWaiter.wait(in: folder, timeout: 30, what: "the metrics file with the batch's counts") {
            text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            let s = Self.samples(text)
            return Self.value(s, "spoolfetch_items_ended_total", ["outcome": "published"]) == 3
                && Self.value(s, "spoolfetch_items_ended_total", ["outcome": "failed"]) == 1
                && Self.value(s, "spoolfetch_requests_rejected_total") == 1
                && Self.value(s, "spoolfetch_hosts_unreachable") == 1
                && (Self.value(s, "spoolfetch_oldest_queued_timestamp_seconds") ?? 0) > 0
        }
        let check = try Self.promtool(["check", "metrics"], stdin: text)
        XCTAssertEqual(check.status, 0, "promtool check metrics:\n\(check.output)\n\(text)")
        XCTAssertEqual(check.output, "", "promtool's lint has nothing to say")

        let s = Self.samples(text)
        XCTAssertTrue(s.allSatisfy { $0.labels["worker"] == worker }, "every series has worker=\(worker)")
        XCTAssertEqual(Self.value(s, "spoolfetch_items_ended_total", ["outcome": "published"]), Double(published))
        XCTAssertEqual(Self.value(s, "spoolfetch_items_ended_total", ["outcome": "failed", "code": "http-status"]),
                       Double(failedItems.filter { $0["code"] as? String == "http-status" }.count))
        XCTAssertEqual(Self.value(s, "spoolfetch_requests_rejected_total"), Double(rejected))
        XCTAssertEqual(Self.value(s, "spoolfetch_requests_claimed_total"), 3, "good, missing and down")
        let received = try XCTUnwrap(Self.value(s, "spoolfetch_received_bytes_total"))
        XCTAssertGreaterThanOrEqual(received, Double(sizes), "every published byte was received")
        XCTAssertLessThan(received, Double(sizes + 4096), "and little besides (the 404's body)")
        XCTAssertEqual(Self.value(s, "spoolfetch_item_duration_seconds_count"), 4, "3 published, 1 failed")
        XCTAssertEqual(Self.value(s, "spoolfetch_publish_latency_seconds_count"), 3)

        // The outage: one host, since when the status report says.
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(
            try spool.read("status", worker + ".json"))) as? [String: Any])
        let daemonStatus = try XCTUnwrap(status["daemon"] as? [String: Any])
        let hosts = try XCTUnwrap(daemonStatus["unreachableHosts"] as? [[String: Any]])
        XCTAssertEqual(hosts.count, 1)
        let since = try XCTUnwrap(s.first { $0.name == "spoolfetch_host_unreachable_since_timestamp_seconds" })
        XCTAssertEqual(since.labels["host"], "127.0.0.1:\(port)")
        let sinceText = try XCTUnwrap(hosts[0]["since"] as? String)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let sinceDate = try XCTUnwrap(formatter.date(from: sinceText) ?? ISO8601DateFormatter().date(from: sinceText))
        XCTAssertEqual(since.value, sinceDate.timeIntervalSince1970, accuracy: 0.01)
        // Open items: the outage's one, in the same state as the report says.
        let states = try XCTUnwrap(daemonStatus["states"] as? [String: Int])
        XCTAssertEqual(Self.value(s, "spoolfetch_items"), Double(states.values.reduce(0, +)))
        XCTAssertEqual(Self.value(s, "spoolfetch_items"), 1)
        let oldest = try XCTUnwrap(Self.value(s, "spoolfetch_oldest_queued_timestamp_seconds"))
        XCTAssertGreaterThanOrEqual(oldest, launched.timeIntervalSince1970 - 1, "when the outage's item was first queued")
        XCTAssertLessThanOrEqual(oldest, Date().timeIntervalSince1970)

        // `status --metrics` prints the same text (read from status/), once.
        let before = try String(contentsOfFile: path, encoding: .utf8)
        let cli = try DaemonProcess.launch(["status", "--metrics", "--spool", spool.root])
        XCTAssertEqual(try cli.waitForExit(timeout: 30), 0, cli.stderrText)
        if before == (try String(contentsOfFile: path, encoding: .utf8)) {
            XCTAssertEqual(cli.stdoutText, before)
        }
        XCTAssertEqual(try Self.promtool(["check", "metrics"], stdin: cli.stdoutText).status, 0)

        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText)
        XCTAssertFalse(spool.files(in: "status").contains(worker + ".prom"), "status/ shows live daemons only")
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), "--metrics-file keeps the last numbers")
        XCTAssertFalse(try FileManager.default.contentsOfDirectory(atPath: folder).contains { $0.hasSuffix(".tmp") })
    }

    func testAnIdleDaemonWithAMetricsFileMakesNoWakeupsAndNoWrites() throws {
        let folder = spool.root + "/collector"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/spoolfetch.prom"
        let launched = Date()
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--metrics-file", path, "--metrics-interval", "1",
                                               "--adopt-interval", "0", "--lease-period", "2", "--lease-timeout", "10",
                                               "--log-level", "warning"])
        defer { daemon.terminate() }
        try DirectoryWaiter.waitForFile("spoolfetch.prom", in: folder, timeout: 30)
        let report = "\(ProcessInfo.processInfo.hostName)-\(daemon.pid).json"
        try DirectoryWaiter.waitForFile(report, in: spool.path("status"), timeout: 30)

        // The lease thread wakes once per lease period by design (its renewal is the worker's
        // proof of life on a shared spool): counted apart, and held to that.
        func contextSwitches(lease: Bool = false) -> Int {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/task")) ?? []
            return tasks.filter { task in
                let name = (try? String(contentsOfFile: "/proc/\(daemon.pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
                return (name.trimmingCharacters(in: .whitespacesAndNewlines) == "spoolfetch-leas") == lease
            }.reduce(0) { sum, task in
                let text = (try? String(contentsOfFile: "/proc/\(daemon.pid)/task/\(task)/status", encoding: .utf8)) ?? ""
                return sum + text.split(separator: "\n").filter { $0.contains("ctxt_switches") }
                    .compactMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }.reduce(0, +)
            }
        }
        func fileState() -> [Int] {
            var st = stat()
            guard stat(path, &st) == 0 else { return [] }
            return [Int(st.st_ino), st.st_mtim.tv_sec, st.st_mtim.tv_nsec]
        }
        // Idle from when start-up has settled: the files above appear while the start-up turn may
        // still be finishing (a message posted during start-up, a thread preempted on a loaded
        // machine). Settled = no switch of the daemon's other threads over half a second, looked
        // for within 15 s; what is then asserted is the 5 s after.
        var settled = contextSwitches()
        let settleDeadline = Date().addingTimeInterval(15)
        while true {
            usleep(500_000)   // the span looked at, not a synchronisation
            let now = contextSwitches()
            if now == settled { break }
            settled = now
            guard Date() < settleDeadline else { return XCTFail("the daemon's threads never went quiet for 0.5 s within 15 s of start-up") }
        }
        let switchesBefore = contextSwitches(), leaseBefore = contextSwitches(lease: true), fileBefore = fileState()
        XCTAssertGreaterThan(switchesBefore, 0)
        XCTAssertGreaterThan(leaseBefore, 0, "the lease thread is there")
        usleep(5_000_000)   // the span measured, not a synchronisation
        XCTAssertEqual(contextSwitches() - switchesBefore, 0, "wake-ups of the idle daemon's threads over 5 s")
        // --lease-period 2: two or three renewals in 5 s, each a wake-up and a write + fsync (a
        // few switches each), nothing more.
        XCTAssertLessThanOrEqual(contextSwitches(lease: true) - leaseBefore, 3 * 4, "the lease thread's wake-ups over 5 s")
        XCTAssertEqual(fileState(), fileBefore, "the metrics file was not written again while idle")
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText)
    }

    func testAMetricsFileInAMissingFolderIsRefusedAtStart() throws {
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--metrics-file", spool.root + "/nowhere/m.prom"])
        XCTAssertNotEqual(try daemon.waitForExit(timeout: 30), 0)
        XCTAssertTrue(daemon.stderrText.contains("--metrics-file: its folder cannot be opened"), daemon.stderrText)
        XCTAssertTrue(daemon.stderrText.contains("nowhere"), daemon.stderrText)
    }

    func testTheContribAlertRulesPassPromtool() throws {
        let rules = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("contrib/prometheus/spoolfetch-alerts.yml").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: rules), rules)
        let check = try Self.promtool(["check", "rules", rules])
        XCTAssertEqual(check.status, 0, check.output)
        XCTAssertTrue(check.output.contains("SUCCESS"), check.output)
    }
}
