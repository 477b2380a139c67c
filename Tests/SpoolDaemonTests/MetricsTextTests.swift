import Foundation
@testable import SpoolDaemon
import SpoolMetrics
import XCTest

/// The metrics' text: one daemon's, and several merged for `status --metrics`.
final class MetricsTextTests: XCTestCase {
    private func text(_ worker: String, failed: Int) -> String {
        let m = DaemonMetrics(worker: worker, version: "1.2.3", startedAt: Date(timeIntervalSince1970: 1_800_000_000))
        for _ in 0..<failed { m.itemEnded(outcome: "failed", code: "http-status", seconds: 2) }
        m.itemEnded(outcome: "published", seconds: 0.2)
        var snapshot = DaemonMetrics.Snapshot()
        snapshot.states = ["pending": 4]
        snapshot.outages = [("a.example:443", Date(timeIntervalSince1970: 1_800_000_100))]
        m.set(snapshot)
        return String(decoding: m.text(), as: UTF8.self)
    }

    func testOneFamilyPerNameWithEveryWorkersSamples() {
        let merged = ExpositionText.merge([text("vm-1", failed: 2), text("vm-2", failed: 0)])
        let lines = merged.split(separator: "\n")
        XCTAssertEqual(lines.filter { $0 == "# TYPE spoolfetch_items_ended_total counter" }.count, 1, merged)
        XCTAssertTrue(lines.contains(#"spoolfetch_items_ended_total{worker="vm-1",code="http-status",outcome="failed"} 2"#), merged)
        XCTAssertTrue(lines.contains(#"spoolfetch_items_ended_total{worker="vm-2",outcome="published"} 1"#), merged)
        XCTAssertTrue(lines.contains(#"spoolfetch_items{worker="vm-1",state="pending"} 4.0"#), merged)
        XCTAssertTrue(lines.contains(#"spoolfetch_host_unreachable_since_timestamp_seconds{worker="vm-2",host="a.example:443"} 1800000100.0"#), merged)
        XCTAssertTrue(lines.contains(#"spoolfetch_build_info{worker="vm-1",version="1.2.3"} 1.0"#), merged)
        // Each family's samples follow its own header, for both workers.
        var family = ""
        for line in lines {
            if line.hasPrefix("# TYPE ") { family = String(line.split(separator: " ")[2]); continue }
            if line.hasPrefix("#") { continue }
            XCTAssertTrue(line.hasPrefix(family), "\(line) outside its family \(family)")
        }
    }

    func testAHostThatAnswersAgainLeavesTheText() {
        let m = DaemonMetrics(worker: "w", version: "1", startedAt: Date())
        var snapshot = DaemonMetrics.Snapshot()
        snapshot.outages = [("a:80", Date()), ("b:80", Date())]
        m.set(snapshot)
        snapshot.outages = [("b:80", Date())]
        m.set(snapshot)
        let text = String(decoding: m.text(), as: UTF8.self)
        XCTAssertFalse(text.contains(#"host="a:80""#), text)
        XCTAssertTrue(text.contains(#"host="b:80""#), text)
        XCTAssertTrue(text.contains(#"spoolfetch_hosts_unreachable{worker="w"} 1.0"#), text)
    }
}
