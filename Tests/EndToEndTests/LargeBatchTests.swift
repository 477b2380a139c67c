import Foundation
import SpoolTestSupport
import XCTest

/// Batches of the size batch tools emit: lists of 100,000 URLs, many waiting requests.
final class LargeBatchTests: SpoolTestCase {
    /// The daemon's own report, once `predicate` holds for it.
    private func waitForReport(timeout: Double, what: String,
                               until predicate: @escaping ([String: Any]) -> Bool) throws -> [String: Any] {
        var found: [String: Any]?
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: timeout, what: what) {
            for name in self.spool.files(in: "status") where name.hasSuffix(".json") {
                guard let bytes = try? self.spool.read("status", name),
                      let report = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                      let daemon = report["daemon"] as? [String: Any], predicate(daemon) else { continue }
                found = daemon
                return true
            }
            return false
        }
        return try XCTUnwrap(found)
    }

    func testAHundredThousandURLListIsAcceptedAndEveryItemQueued() throws {
        let count = 100_000
        var text = "earliest-start: 2030-01-01T00:00:00Z\n"
        text.reserveCapacity(count * 48)
        for i in 0..<count { text += "http://127.0.0.1:9/batch/file-\(i).dat\n" }
        XCTAssertGreaterThan(text.utf8.count, 3 << 20, "a list far larger than the old 64 KiB limit")
        try spool.drop("huge", text)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        let started = Date()
        let report = try waitForReport(timeout: 300, what: "100,000 items queued") { ($0["queued"] as? Int ?? 0) >= count }
        print("100,000-URL list: queued after \(String(format: "%.1f", Date().timeIntervalSince(started))) s (debug build)")
        XCTAssertEqual(report["queued"] as? Int, count)
        let states = try XCTUnwrap(report["states"] as? [String: Int])
        XCTAssertEqual(states["waiting-start"], count)
        XCTAssertEqual(spool.files(in: "rejected"), [], daemon.stderrText)
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 60), 0, daemon.stderrText)
    }
}
