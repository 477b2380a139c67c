import Foundation

/// Exponential back-off with full jitter for retries of transient failures.
///
/// The delay for attempt n (1-based) is `base * 2^(n-1)`, capped, scaled by a jitter factor in
/// [0.5, 1.0] so that many items failing together do not retry in lock-step. `Retry-After` from
/// the server wins when it is longer. Pure: the random factor is passed in.
public struct Backoff: Sendable, Hashable {
    public var base: Double
    public var cap: Double

    public init(base: Double = 1, cap: Double = 300) {
        self.base = max(0.001, base)
        self.cap = max(self.base, cap)
    }

    /// - Parameters:
    ///   - attempt: how many attempts have failed so far (≥ 1).
    ///   - jitter: a random number in 0...1.
    ///   - retryAfter: the server's Retry-After in seconds, if any.
    public func delay(afterAttempt attempt: Int, jitter: Double, retryAfter: Double? = nil) -> Double {
        let exponent = Double(min(max(attempt - 1, 0), 40))
        let raw = min(cap, base * pow(2, exponent))
        let jittered = raw * (0.5 + 0.5 * min(max(jitter, 0), 1))
        if let server = retryAfter, server > jittered { return min(server, max(cap, server)) }
        return jittered
    }
}
