import Foundation
import SpoolTestSupport
import XCTest

/// `--max-rate` on the real daemon against the in-process server on 127.0.0.1: the bytes the
/// daemon received stay within 10 % of the cap over every 5-second window, for many small files of
/// one request and for many large files at once.
///
/// Where the timeline comes from: the spool itself, sampled every 50 ms while the run lasts —
/// every part the daemon holds open in `staging/` (a body under 1 MiB has no name there until it
/// is published, see `UnnamedPartSupport`: it is found through `/proc/PID/fd`), every
/// `staging/*.part`, and every published file in `final/`, counted once per inode (a publish
/// links or renames the part, keeping its inode, so a file caught twice counts once). The daemon
/// writes each chunk with `pwrite` in libcurl's write callback right after the rate gate admits it,
/// so a file's size is what got through the gate. The server's side would not do: loopback
/// sockets buffer megabytes (autotuned receive and send buffers), so the server "sends" far ahead
/// of what the daemon reads, and it records only when each request arrived. Marker times alone
/// would not do either for large files (one time per file). The sampling is a measurement, not a
/// synchronisation: the run's end is the spool's own signal (every marker in `final/`, then the
/// drain's exit), waited for with a bound.
final class RateEndToEndTests: SpoolTestCase {
    /// One sample: when it was taken (the listing's start and end, seconds since the run's start)
    /// and the bytes received by then.
    private struct Sample {
        var from: Double
        var to: Double
        var bytes: Int64
    }

    func testMaxRateHoldsOverManySmallFilesOfOneRequest() throws {
        let count = 80, size = 48 << 10      // 3.75 MiB: 15 s at 256 KiB/s
        try measure(count: count, size: size, rate: 256 << 10, rateFlag: "256k", extra: [])
    }

    func testMaxRateHoldsOverManyConcurrentLargeFiles() throws {
        let count = 32, size = 512 << 10     // 16 MiB: 16 s at 1 MiB/s, all 32 running at once
        try measure(count: count, size: size, rate: 1 << 20, rateFlag: "1M",
                    extra: ["--concurrency", "32", "--per-host", "32"])
    }

    // MARK: Helpers

    private func measure(count: Int, size: Int, rate: Int64, rateFlag: String, extra: [String],
                         file: StaticString = #filePath, line: UInt = #line) throws {
        var request = ""
        for i in 0..<count {
            server.serve("/r\(i)", body: TestBody.random(count: size, seed: UInt64(700 + i)))
            request += server.url("/r\(i)") + "\nname: r\(i).bin\n"
        }
        // Dropped first: a drain that finds nothing to do exits at once.
        try spool.drop("rated", request)
        let start = Date()
        // Not `--once`: the process must still be there to be read when the last marker appears.
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--max-rate", rateFlag,
                                               "--log-level", "warning"] + extra)
        defer { daemon.terminate() }
        let expectedSeconds = Double(count * size) / Double(rate)
        let bound = expectedSeconds * 2 + 10
        var samples: [Sample] = [Sample(from: 0, to: 0, bytes: 0)]
        while Date().timeIntervalSince(start) < bound {
            let from = Date().timeIntervalSince(start)
            // Markers first: when all are there, every body byte was written before the bytes are counted.
            let markers = spool.files(in: "final").filter { $0.hasSuffix(".bin.done") }.count
            let bytes = receivedBytes(daemon: daemon)
            samples.append(Sample(from: from, to: Date().timeIntervalSince(start), bytes: bytes))
            if markers == count { break }
            usleep(50_000)
        }
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText, file: file, line: line)
        let total = try XCTUnwrap(samples.last, file: file, line: line)
        XCTAssertEqual(total.bytes, Int64(count * size), "every byte arrived within \(bound) s", file: file, line: line)
        for i in 0..<count {
            XCTAssertEqual(try spool.read("final", "r\(i).bin").count, size, file: file, line: line)
        }

        // Every window of (at most) 5 s: bytes between a sample's listing start and a later
        // sample's listing end bound from above what arrived within that span.
        let window = 5.0, cap = Double(rate)
        var highest = 0.0, windows = 0
        for (i, earlier) in samples.enumerated() {
            for later in samples[(i + 1)...] where later.to - earlier.from <= window {
                let moved = Double(later.bytes - earlier.bytes)
                highest = max(highest, moved / window)
            }
            if samples.contains(where: { $0.to - earlier.from > window }) { windows += 1 }
        }
        // And from below, over the whole run: a rate far under the cap would be a gate that
        // pauses too long (on a loaded test machine the daemon may lag a little, never burst).
        let seconds = total.to
        let average = Double(total.bytes) / seconds
        print("max-rate \(rateFlag), \(count) × \(size) B: \(windows) windows of 5 s, highest \(Int(highest)) B/s, "
              + "average \(Int(average)) B/s over \(String(format: "%.2f", seconds)) s, cap \(Int(cap)) B/s")
        XCTAssertGreaterThan(windows, 10, "enough 5 s windows to judge", file: file, line: line)
        XCTAssertLessThanOrEqual(highest, cap * 1.10, "a 5 s window above the cap by more than 10 %", file: file, line: line)
        XCTAssertGreaterThanOrEqual(average, cap * 0.80, "the run kept near the cap", file: file, line: line)
    }
}
