import Foundation
import SpoolCore

/// A transfer's receive rate over a moving window of byte-count samples (one per status
/// report). Unlike a rate between two consecutive samples, it is never 0 while bytes advanced
/// within the window, and the rates of all running items add up to the daemon's total.
struct RateWindow {
    /// How far back the rate looks, in seconds.
    static let span: Double = 5
    private var samples: [(at: Date, bytes: Int64)] = []

    /// Records the byte count at `at`; samples older than the window (but the newest such one,
    /// which anchors the window's start) are dropped.
    mutating func add(bytes: Int64, at: Date) {
        if let last = samples.last, bytes < last.bytes { samples.removeAll() }   // started over
        samples.append((at, bytes))
        while samples.count > 2, at.timeIntervalSince(samples[1].at) >= Self.span { samples.removeFirst() }
    }

    /// Bytes per second over the window; nil until two samples at least 0.2 s apart exist.
    var rate: Double? {
        guard let first = samples.first, let last = samples.last else { return nil }
        let seconds = last.at.timeIntervalSince(first.at)
        guard seconds >= 0.2 else { return nil }
        return Double(last.bytes - first.bytes) / seconds
    }

    /// Seconds until `total` at the current rate; nil when unknown.
    func eta(total: Int64?, bytes: Int64) -> Double? {
        guard let total, total > bytes, let rate, rate > 0 else { return nil }
        return Double(total - bytes) / rate
    }
}
