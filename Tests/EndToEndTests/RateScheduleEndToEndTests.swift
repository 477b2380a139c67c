import Foundation
import SpoolTestSupport
import XCTest

/// `--max-rate` by time of day and a request's own `max-rate:`, on the real daemon against the
/// in-process server on 127.0.0.1. Rates are read from the spool as in `RateEndToEndTests`
/// (every part and published file, sampled every 50 ms); the run's signals (the status report,
/// markers) are waited for with a bound.
final class RateScheduleEndToEndTests: SpoolTestCase {
    /// One sample: its time (the middle of its listing, seconds since 1970) and the bytes by then.
    private struct Sample {
        var at: Double
        var bytes: Int64
    }

    /// Bytes per second between the first sample at or after `from` and the last at or before `to`.
    private func rate(_ samples: [Sample], from: Double, to: Double) -> (rate: Double, seconds: Double)? {
        guard let a = samples.first(where: { $0.at >= from }), let b = samples.last(where: { $0.at <= to }),
              b.at - a.at > 1 else { return nil }
        return (Double(b.bytes - a.bytes) / (b.at - a.at), b.at - a.at)
    }

    private func clock(_ secondOfDay: Int) -> String {
        String(format: "%02d:%02d:%02d", secondOfDay / 3600, secondOfDay / 60 % 60, secondOfDay % 60)
    }

    /// The daemon's entry in its status report, once there is one.
    private func daemonStatus() -> [String: Any]? {
        for name in spool.files(in: "status") where name.hasSuffix(".json") {
            guard let bytes = try? spool.read("status", name),
                  let json = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { continue }
            return json["daemon"] as? [String: Any]
        }
        return nil
    }

    func testAScheduleSwitchesTheRateAtItsBoundary() throws {
        let count = 4, size = 8 << 20
        var request = ""
        for i in 0..<count {
            server.serve("/s\(i)", body: TestBody.random(count: size, seed: UInt64(900 + i)))
            request += server.url("/s\(i)") + "\nname: s\(i).bin\n"
        }
        try spool.drop("scheduled", request)
        // A window that opens 10 s from now (local time, on a whole second) and lasts an hour:
        // 1 MiB/s before it, 256 KiB/s inside.
        let boundary = (Date().timeIntervalSince1970 + 10).rounded(.down)
        let zone = TimeZone.current
        let local = (Int(boundary) + zone.secondsFromGMT(for: Date(timeIntervalSince1970: boundary))) % 86_400
        let opens = (local + 86_400) % 86_400
        let schedule = "256k \(clock(opens))-\(clock((opens + 3600) % 86_400)), 1M"
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--max-rate", schedule,
                                               "--concurrency", "4", "--per-host", "4", "--log-level", "notice"])
        defer { daemon.terminate() }
        var samples: [Sample] = []
        var reported: [(rate: Int64, until: String?)] = []
        let end = boundary + 9
        while Date().timeIntervalSince1970 < end {
            let from = Date().timeIntervalSince1970
            let bytes = receivedBytes(daemon: daemon)
            samples.append(Sample(at: (from + Date().timeIntervalSince1970) / 2, bytes: bytes))
            if let d = daemonStatus(), let rate = (d["maxRate"] as? NSNumber)?.int64Value,
               reported.last.map({ $0.rate != rate }) ?? true {
                reported.append((rate, d["maxRateUntil"] as? String))
            }
            usleep(50_000)
        }
        let json = try DaemonProcess.launch(["status", "--json", "--spool", spool.root])
        XCTAssertEqual(try json.waitForExit(timeout: 30), 0, json.stderrText)
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText)

        let firstByte = try XCTUnwrap(samples.first(where: { $0.bytes > 0 })?.at, "no byte arrived")
        let before = try XCTUnwrap(rate(samples, from: firstByte + 1, to: boundary - 0.3), "samples before the boundary")
        let after = try XCTUnwrap(rate(samples, from: boundary + 1, to: end), "samples after the boundary")
        print("schedule \(schedule): \(Int(before.rate)) B/s over \(String(format: "%.1f", before.seconds)) s before, "
              + "\(Int(after.rate)) B/s over \(String(format: "%.1f", after.seconds)) s after")
        XCTAssertGreaterThan(before.seconds, 5)
        XCTAssertGreaterThan(after.seconds, 5)
        XCTAssertEqual(before.rate, Double(1 << 20), accuracy: Double(1 << 20) * 0.10, "1M before the window")
        XCTAssertEqual(after.rate, Double(256 << 10), accuracy: Double(256 << 10) * 0.10, "256k inside the window")

        // Status says the rate in force and until when.
        XCTAssertEqual(reported.map(\.rate), [1 << 20, 256 << 10], "\(reported)")
        XCTAssertEqual(reported.first?.until, rfc3339(Date(timeIntervalSince1970: boundary)))
        XCTAssertEqual(reported.last?.until, rfc3339(Date(timeIntervalSince1970: boundary + 3600)))
        XCTAssertTrue(json.stdoutText.contains("\"maxRate\":262144"), json.stdoutText)
        XCTAssertTrue(daemon.stderrText.contains("max-rate changed by its schedule"), daemon.stderrText)
    }

    func testARequestsOwnRateHoldsBesideAnUncappedRequest() throws {
        let cap = 512 << 10, cappedCount = 3, cappedSize = 2 << 20       // 6 MiB: 12 s at 512 KiB/s
        let freeCount = 4, freeSize = 16 << 20
        // expected-bytes of 1 MiB and more: each part has a name in staging/ from its start, so
        // the capped request's bytes can be told from the other's.
        var capped = "max-rate: 512k\nexpected-bytes: 2M\n"
        for i in 0..<cappedCount {
            server.serve("/c\(i)", body: TestBody.random(count: cappedSize, seed: UInt64(950 + i)))
            capped += server.url("/c\(i)") + "\nname: c\(i).bin\n"
        }
        var free = "expected-bytes: 16M\n"
        for i in 0..<freeCount {
            server.serve("/u\(i)", body: TestBody.random(count: freeSize, seed: UInt64(970 + i)))
            free += server.url("/u\(i)") + "\nname: u\(i).bin\n"
        }
        try spool.drop("capped", capped)
        try spool.drop("free", free)
        let start = Date().timeIntervalSince1970
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--concurrency", "16", "--per-host", "16",
                                               "--log-level", "warning"])
        defer { daemon.terminate() }
        var samples: [Sample] = []
        var freeDoneAt: Double?
        let bound = start + Double(cappedCount * cappedSize) / Double(cap) * 2 + 10
        while Date().timeIntervalSince1970 < bound {
            let from = Date().timeIntervalSince1970
            let markers = spool.files(in: "final").filter { $0.hasSuffix(".bin.done") }
            let bytes = receivedBytes(daemon: daemon, part: { $0?.hasPrefix("capped") ?? false },
                                      published: { $0.hasPrefix("c") })
            let now = (from + Date().timeIntervalSince1970) / 2
            samples.append(Sample(at: now, bytes: bytes))
            if freeDoneAt == nil, markers.filter({ $0.hasPrefix("u") }).count == freeCount { freeDoneAt = now }
            if markers.filter({ $0.hasPrefix("c") }).count == cappedCount { break }
            usleep(50_000)
        }
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText)
        for i in 0..<cappedCount { XCTAssertEqual(try spool.read("final", "c\(i).bin").count, cappedSize) }
        for i in 0..<freeCount { XCTAssertEqual(try spool.read("final", "u\(i).bin").count, freeSize) }
        let total = try XCTUnwrap(samples.last)
        XCTAssertEqual(total.bytes, Int64(cappedCount * cappedSize), "every capped byte counted")

        // The capped request: no 5 s window above its cap by more than 10 %, and near it overall.
        var highest = 0.0
        for (i, a) in samples.enumerated() {
            for b in samples[(i + 1)...] where b.at - a.at <= 5 { highest = max(highest, Double(b.bytes - a.bytes) / 5) }
        }
        let firstByte = try XCTUnwrap(samples.first(where: { $0.bytes > 0 })?.at)
        let average = Double(total.bytes) / (total.at - firstByte)
        // The uncapped one finished while the capped one ran, far faster than the cap.
        let freeSeconds = try XCTUnwrap(freeDoneAt, "the uncapped request finished before the capped one") - start
        let freeRate = Double(freeCount * freeSize) / freeSeconds
        print("per-request max-rate 512k: highest 5 s window \(Int(highest)) B/s, average \(Int(average)) B/s; "
              + "uncapped beside it \(Int(freeRate)) B/s (\(String(format: "%.2f", freeSeconds)) s)")
        XCTAssertLessThanOrEqual(highest, Double(cap) * 1.10, "a 5 s window above the request's cap by more than 10 %")
        XCTAssertGreaterThanOrEqual(average, Double(cap) * 0.90, "the capped request kept near its cap")
        XCTAssertGreaterThan(freeRate, Double(cap) * 4, "the uncapped request is not held to the other's cap")
    }
}
