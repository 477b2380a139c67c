import Foundation

/// The session-wide `--max-rate` budget: a token bucket in bytes, refilled at `rate` per second,
/// holding at most `capacity`. Pure: every call takes the time (seconds on any monotonic clock).
///
/// A chunk is admitted while the balance is positive and may take it below zero (libcurl hands
/// over whole buffers; refusing a chunk bigger than the balance would never admit it); the debt
/// is paid back before the next one. So over any window the bytes admitted are at most
/// `rate × window + capacity + one chunk`, whatever the number of transfers.
public struct TokenBucket: Sendable, Hashable {
    /// Bytes per second.
    public private(set) var rate: Double
    /// The largest burst after an idle time.
    public private(set) var capacity: Double
    /// Balance in bytes; negative while a chunk's debt is being paid back.
    public private(set) var balance: Double
    private var updatedAt: Double

    /// Capacity: a fifth of a second at the rate (at least 16 KiB), so a burst after idling adds
    /// at most 4 % to a 5-second window.
    public init(rate: Double, now: Double) {
        self.rate = max(1, rate)
        capacity = max(16 * 1024, self.rate / 5)
        balance = capacity
        updatedAt = now
    }

    /// Changes the rate, keeping the balance (clipped to the new capacity).
    public mutating func setRate(_ newRate: Double, now: Double) {
        refill(now)
        rate = max(1, newRate)
        capacity = max(16 * 1024, rate / 5)
        balance = min(balance, capacity)
    }

    /// Takes `bytes` if the balance is positive; false means "pause and ask again later".
    public mutating func admit(_ bytes: Int, now: Double) -> Bool {
        guard hasBalance(now: now) else { return false }
        take(bytes)
        return true
    }

    /// Whether a chunk may go now (the balance is positive), without taking it: a chunk that
    /// passes two buckets (its request's and the session's) is taken from both or from neither.
    public mutating func hasBalance(now: Double) -> Bool {
        refill(now)
        return balance > 0
    }

    /// Takes `bytes` asked for with `hasBalance` (the balance may go below zero).
    public mutating func take(_ bytes: Int) {
        balance -= Double(bytes)
    }

    /// Whether the bucket is full again at `now` (it owes nothing and has nothing left to refill).
    public func isFull(now: Double) -> Bool {
        balance + max(0, now - updatedAt) * rate >= capacity
    }

    /// When paused transfers should be resumed: once the balance is back to a fiftieth of a
    /// second of rate (so paused transfers are woken at most ~50 times a second, not per byte).
    public func resumeTime(now: Double) -> Double {
        let threshold = min(capacity, max(1, rate / 50))
        let current = min(capacity, balance + (now - updatedAt) * rate)
        if current >= threshold { return now }
        return now + (threshold - current) / rate
    }

    private mutating func refill(_ now: Double) {
        if now > updatedAt {
            balance = min(capacity, balance + (now - updatedAt) * rate)
            updatedAt = now
        }
    }
}
