internal import CCurl
import Foundation

/// The session-wide `--max-rate`: every body chunk of every transfer passes the one `TokenBucket`
/// in the write callback. A chunk that finds the bucket empty pauses its transfer
/// (CURL_WRITEFUNC_PAUSE: libcurl keeps the chunk and stops reading the socket, so TCP pushes back
/// on the server); paused transfers are resumed, oldest first, when the bucket has refilled —
/// `nextDeadline` tells the engine when, so it can sleep until then.
///
/// libcurl's own CURLOPT_MAX_RECV_SPEED_LARGE is per transfer: shared out among running transfers
/// it is re-divided at every start and end, and libcurl 7.88 checks it only between reads of up to
/// 100 buffers, so many short or concurrent transfers let bursts through. One bucket does not.
final class RateGate {
    private var bucket: TokenBucket?
    /// Transfers paused by the bucket, in the order they were paused.
    private var paused: [Transfer] = []

    /// Bytes per second for the whole session; 0 or less: no limit.
    func setRate(_ bytesPerSecond: Int64) {
        let now = Self.now()
        if bytesPerSecond <= 0 {
            bucket = nil
        } else if bucket == nil {
            bucket = TokenBucket(rate: Double(bytesPerSecond), now: now)
        } else {
            bucket!.setRate(Double(bytesPerSecond), now: now)
        }
    }

    var isLimiting: Bool { bucket != nil }

    /// Called by the write callback before it takes `bytes`; false: the transfer is now paused and
    /// the callback must return CURL_WRITEFUNC_PAUSE.
    func admit(_ transfer: Transfer, bytes: Int) -> Bool {
        guard bytes > 0, bucket != nil else { return true }
        if bucket!.admit(bytes, now: Self.now()) { return true }
        transfer.pausedForRate = true
        paused.append(transfer)
        return false
    }

    /// When paused transfers are due to resume; nil when none is paused.
    var nextDeadline: Date? {
        guard let bucket, !paused.isEmpty else { return nil }
        let now = Self.now()
        return Date().addingTimeInterval(max(0, bucket.resumeTime(now: now) - now))
    }

    /// Resumes the paused transfers if the bucket has refilled. libcurl delivers each one's kept
    /// chunk from inside `curl_easy_pause`, so the first ones take the budget and the rest pause
    /// again at once, at the back of the line. A transfer libcurl refuses to resume fails with
    /// that error instead of waiting forever.
    func resumeIfDue() {
        guard let bucket, !paused.isEmpty else { return }
        let now = Self.now()
        guard bucket.resumeTime(now: now) <= now else { return }
        let waking = paused
        paused = []
        for transfer in waking where transfer.pausedForRate {
            transfer.pausedForRate = false
            let code = spoolfetch_easy_unpause(transfer.easy.raw)
            // A range that reached its end inside the unpause ends there on purpose (see `Transfer.stopAt`).
            if code != CURLE_OK, transfer.abortReason == nil, !transfer.reachedStop {
                transfer.abortReason = .curl(code: Int(code.rawValue),
                                             text: "curl_easy_pause: " + String(cString: curl_easy_strerror(code)))
            }
        }
    }

    /// The transfer left the session (ended or removed).
    func forget(_ transfer: Transfer) {
        guard transfer.pausedForRate else { return }
        transfer.pausedForRate = false
        paused.removeAll { $0 === transfer }
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
