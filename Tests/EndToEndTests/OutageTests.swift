import Foundation
import SpoolTestSupport
import XCTest

/// A host that cannot be reached is waited out: no attempts used, one probe at a time.
final class OutageTests: SpoolTestCase {
    func testItemsOfAClosedPortWaitWithoutUsingAttemptsAndAllPublishWhenItOpens() throws {
        // A port that was open and is now closed: connections are refused.
        let gone = try TestHTTPServer.start()
        let port = gone.port
        try gone.shutdown()
        let count = 200
        let list = (0..<count).map { "http://127.0.0.1:\(port)/f\($0)" }.joined(separator: "\n")
        try spool.drop("outage", list + "\n")
        // A second host stays fully served meanwhile.
        for i in 0..<20 { server.serve("/o\(i)", body: Array("other \(i)".utf8)) }
        try spool.drop("other", (0..<20).map { server.url("/o\($0)") }.joined(separator: "\n") + "\n")

        // Attempts would run out in well under a second: 2 attempts, 50-100 ms apart.
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--max-attempts", "2",
                                               "--retry-base", "0.05", "--retry-cap", "0.1"])
        defer { daemon.terminate() }
        try DirectoryWaiter.waitForFile("other.group.done", in: spool.path("final"), timeout: 30)
        XCTAssertEqual(try json("final", "other.group.done")["published"] as? Int, 20)
        try daemon.waitForStderr(containing: "host unreachable; its items wait", timeout: 30)
        // Let the outage outlast many times what the attempts would have lasted: two failed probes.
        try daemon.waitForStderr(timeout: 30, what: "two failed probes") { log in
            log.components(separatedBy: "probe failed").count - 1 >= 2
        }
        XCTAssertEqual(spool.files(in: "failed"), [], "an outage fails nothing")

        let back = try TestHTTPServer.start(port: port)
        defer { try? back.shutdown() }
        for i in 0..<count { back.serve("/f\(i)", body: Array("file \(i)".utf8)) }
        try DirectoryWaiter.waitForFile("outage.group.done", in: spool.path("final"), timeout: 90)

        let group = try json("final", "outage.group.done")
        XCTAssertEqual(group["published"] as? Int, count)
        XCTAssertEqual(group["failed"] as? Int, 0)
        var waited = 0
        for i in 0..<count {
            let marker = try json("final", "f\(i).done")
            XCTAssertEqual(marker["attempts"] as? Int, 1, "f\(i): the outage used up no attempt")
            if (marker["outageSeconds"] as? Int ?? 0) > 0 { waited += 1 }
        }
        XCTAssertGreaterThan(waited, 0, "markers record the time spent waiting for the host")
        let log = daemon.stderrText
        XCTAssertEqual(log.components(separatedBy: "host unreachable; its items wait").count - 1, 1,
                       "one log line when the host goes down, not one per item")
        XCTAssertTrue(log.contains("host reachable again"), log)
        // Connection attempts during the outage follow the probe schedule, not the item count:
        // the first wave (at most --per-host 6 running when it went down) plus one per probe.
        let probes = log.components(separatedBy: "probing an unreachable host").count - 1
        XCTAssertLessThanOrEqual(probes, 8, "probes: \(probes)")
        XCTAssertEqual(back.requests(for: "/f0").count, 1)
    }

    /// Single-URL requests that wait behind an unreachable host (kept without records while they
    /// wait) still end once their resource timeout has passed: as a probe that finds the host
    /// still down (`connect`), or checked at a probe of another item (`timeout`).
    func testRequestsWaitingBehindAnUnreachableHostEndOnceTheirResourceTimeoutHasPassed() throws {
        let gone = try TestHTTPServer.start()
        let port = gone.port
        try gone.shutdown()
        for i in 0..<4 { try spool.drop("behind-\(i)", "http://127.0.0.1:\(port)/b\(i)\n") }
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--concurrency", "1", "--per-host", "1",
                                               "--resource-timeout", "2"])
        defer { daemon.terminate() }
        // Counted by name: a `.error` being written has a hidden temp name meanwhile.
        let expected = (0..<4).flatMap { ["behind-\($0)", "behind-\($0).error"] }
        try DirectoryWaiter.wait(in: spool.path("failed"), timeout: 60, what: "4 requests failed") {
            Set(expected).isSubset(of: Set(self.spool.files(in: "failed")))
        }
        for i in 0..<4 {
            let error = try json("failed", "behind-\(i).error")
            let code = (error["items"] as? [[String: Any]])?.first?["code"] as? String
            XCTAssertTrue(code == "timeout" || code == "connect", "behind-\(i): \(code ?? "no code")")
        }
    }
}

/// The operator's paths around a host that stays down: cancel lets its record go, and a cron
/// drain says at warning level, and by its exit status, that it left items for it.
final class DownHostPathTests: SpoolTestCase {
    private func closedPortURL() throws -> (port: Int, url: String) {
        let gone = try TestHTTPServer.start()
        let port = gone.port
        try gone.shutdown()
        return (port, "http://127.0.0.1:\(port)/x")
    }

    private func statusReports() -> [[String: Any]] {
        spool.files(in: "status").filter { $0.hasSuffix(".json") }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data(spool.read("status", $0)))) as? [String: Any]
        }
    }

    private func unreachableHosts() -> [String] {
        statusReports().flatMap { report -> [String] in
            let daemon = report["daemon"] as? [String: Any]
            return (daemon?["unreachableHosts"] as? [[String: Any]])?.compactMap { $0["host"] as? String } ?? []
        }
    }

    /// The value of `spoolfetch_hosts_unreachable` in the worker's metrics text.
    private func unreachableGauge() -> String? {
        for name in spool.files(in: "status") where name.hasSuffix(".prom") {
            let text = (try? String(contentsOfFile: spool.path("status", name), encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") where line.hasPrefix("spoolfetch_hosts_unreachable{") {
                return line.split(separator: " ").last.map(String.init)
            }
        }
        return nil
    }

    func testCancellingTheLastItemOfADownHostLetsItsOutageRecordGo() throws {
        let (port, url) = try closedPortURL()
        try spool.drop("down", "url: \(url)\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--metrics-interval", "0.2"])
        defer { daemon.terminate() }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "the host shown unreachable") {
            self.unreachableHosts() == ["127.0.0.1:\(port)"] && self.unreachableGauge() == "1.0"
        }
        // The item names what it waits for: its host, and when the host is probed next.
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "down#0 shown waiting for its host") {
            let task = self.statusReports().lazy.compactMap { ($0["tasks"] as? [[String: Any]])?.first { $0["id"] as? String == "down#0" } }.first
            let waits = task?["waitingFor"] as? String ?? ""
            return task?["state"] as? String == "pending" && waits.contains("host 127.0.0.1:\(port) unreachable since")
                && waits.contains("next probe")
        }
        let cancel = try DaemonProcess.launch(["cancel", "down", "--spool", spool.root])
        XCTAssertEqual(try cancel.waitForExit(timeout: 30), 0, cancel.stderrText)
        try DirectoryWaiter.waitForFile("down", in: spool.path("failed"), timeout: 30)
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "no host shown unreachable") {
            !self.statusReports().isEmpty && self.unreachableHosts().isEmpty
        }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "the metrics without the host") {
            self.unreachableGauge() == "0.0"
        }
    }

    func testADueDrainThatLeftItemsForADownHostExits75AndSaysSoAtWarning() throws {
        let (_, url) = try closedPortURL()
        server.serve("/ok", body: Array("ok".utf8))
        try spool.drop("nightly", "url: \(url)\nurl: \(server.url("/ok"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--log-level", "warning"], mode: "--due", timeout: 60)
        XCTAssertEqual(status, 75, stderr)
        XCTAssertTrue(stderr.contains("items left for unreachable hosts"), stderr)
        XCTAssertTrue(stderr.contains("left-for-hosts=1"), stderr)
        XCTAssertEqual(try spool.read("final", "ok"), Array("ok".utf8))
        XCTAssertEqual(spool.files(in: "failed"), [], "nothing failed: the next run tries again")
    }
}
