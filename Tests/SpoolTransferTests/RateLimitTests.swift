import Foundation
import SpoolTestSupport
import SpoolTransfer
import XCTest

/// `TransferConfiguration.maxRate` against the in-process server on 127.0.0.1: the bytes written by
/// all transfers together, sampled at every turn of the loop, stay within 10 % of the cap over
/// every 5-second window, for many short transfers one after another and for many at once.
final class RateLimitTests: XCTestCase {
    private var server: TestHTTPServer!
    private let rate: Int64 = 256 * 1024
    private let size = 64 * 1024
    private let count = 40                   // 2.5 MiB: 10 s at the cap

    override func setUpWithError() throws {
        server = try TestHTTPServer.start()
        server.serve("/f", body: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    }

    override func tearDownWithError() throws {
        try server.shutdown()
    }

    func testCapHoldsOverManySmallTransfersInSequence() throws {
        let samples = try download(atOnce: 2)
        try assertWindowsHold(samples)
    }

    func testCapHoldsOverManyConcurrentTransfers() throws {
        let samples = try download(atOnce: count)
        try assertWindowsHold(samples)
    }

    func testBucketAdmitsAtTheRateAndPausesOnDebt() {
        var bucket = TokenBucket(rate: 100_000, now: 0)
        XCTAssertEqual(bucket.capacity, 20_000)
        XCTAssertTrue(bucket.admit(50_000, now: 0), "a positive balance admits a whole chunk")
        XCTAssertFalse(bucket.admit(1, now: 0), "in debt: pause")
        XCTAssertEqual(bucket.resumeTime(now: 0), 0.32, accuracy: 1e-9, "30 000 debt + 2 000 threshold at 100 kB/s")
        XCTAssertFalse(bucket.admit(1, now: 0.29))
        XCTAssertTrue(bucket.admit(1, now: 0.33))
        XCTAssertTrue(bucket.admit(0, now: 100), "idle refills")
        XCTAssertEqual(bucket.balance, 20_000, "but only up to the capacity")
    }

    // MARK: Helpers

    /// Downloads `count` copies of /f with at most `atOnce` running; returns (seconds, bytes so far).
    private func download(atOnce: Int) throws -> [(Double, Int64)] {
        var configuration = TransferConfiguration()
        configuration.maxRate = rate
        let driver = try SessionDriver(configuration: configuration)
        var files: [Int: Int32] = [:]
        defer { for fd in files.values { close(fd) } }
        var next = 0
        func startMore() throws {
            while next < count && files.count - driver.outcomes.count < atOnce {
                let fd = try SessionDriver.scratchFile()
                files[next] = fd
                try driver.session.start(key: next, request: TransferRequest(url: server.url("/f"), destination: fd))
                next += 1
            }
        }
        try startMore()
        let start = Date()
        var samples: [(Double, Int64)] = [(0, 0)]
        try driver.run(until: { $0.outcomes.count == self.count }, timeout: 30) {
            var bytes: Int64 = 0
            for key in 0..<next {
                if let done = driver.outcomes[key] { bytes += done.bytesOnDisk }
                else if let progress = driver.session.progress(of: key) { bytes += progress.bytes }
            }
            samples.append((Date().timeIntervalSince(start), bytes))
            try? startMore()
        }
        XCTAssertEqual(driver.outcomes.count, count, "every transfer ended")
        for outcome in driver.outcomes.values { XCTAssertNil(outcome.failure, "\(String(describing: outcome.failure))") }
        return samples
    }

    /// Every 5-second window between the first and the last sample moved 5 s × rate ± 10 %.
    private func assertWindowsHold(_ samples: [(Double, Int64)], file: StaticString = #filePath, line: UInt = #line) throws {
        let total = try XCTUnwrap(samples.last)
        XCTAssertEqual(total.1, Int64(size * count), file: file, line: line)
        let expectedSeconds = Double(size * count) / Double(rate)
        XCTAssertGreaterThan(total.0, expectedSeconds * 0.9, "finished too soon: \(total.0) s", file: file, line: line)
        let window = 5.0
        var worst = (low: Double.infinity, high: 0.0)
        var windows = 0
        for (t, bytes) in samples where t >= window {
            // Bytes at t - window: the last sample at or before it.
            guard let earlier = samples.last(where: { $0.0 <= t - window }) else { continue }
            let moved = Double(bytes - earlier.1) / (t - earlier.0)
            worst = (min(worst.low, moved), max(worst.high, moved))
            windows += 1
        }
        XCTAssertGreaterThan(windows, 10, file: file, line: line)
        guard windows > 0 else { return }
        let cap = Double(rate)
        print("rate windows: \(windows), lowest \(Int(worst.low)) B/s, highest \(Int(worst.high)) B/s, cap \(Int(cap)) B/s, total \(String(format: "%.2f", total.0)) s")
        XCTAssertLessThanOrEqual(worst.high, cap * 1.10, "a 5 s window above the cap by more than 10 %", file: file, line: line)
        XCTAssertGreaterThanOrEqual(worst.low, cap * 0.90, "a 5 s window below the cap by more than 10 %", file: file, line: line)
    }
}
