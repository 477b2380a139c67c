internal import CCurl
import Foundation

/// The session-wide `--max-rate`, and requests' own `max-rate:`: every body chunk of every transfer passes the one `TokenBucket`
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
    /// Requests' own caps (`TransferRequest.rateGroup`) by group name. A group whose transfers
    /// have all left stays until its bucket is full again, so a request's next item does not
    /// start with its last chunk's debt forgiven.
    private var groups: [String: GroupBucket] = [:]
    /// Body bytes every transfer has taken in so far (each chunk counted once, when admitted).
    private(set) var bytesAdmitted: Int64 = 0
    /// Transfers paused by a bucket, in the order they were paused.
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

    /// A transfer entering the session joins its request's bucket (made on first use).
    func join(_ transfer: Transfer, group: RateGroup?) {
        guard let group, group.bytesPerSecond > 0 else { return }
        let now = Self.now()
        if let shared = groups[group.name] {
            if shared.bucket.rate != Double(group.bytesPerSecond) { shared.bucket.setRate(Double(group.bytesPerSecond), now: now) }
            shared.users += 1
            transfer.groupBucket = shared
            return
        }
        groups = groups.filter { $0.value.users > 0 || !$0.value.bucket.isFull(now: now) }
        let shared = GroupBucket(TokenBucket(rate: Double(group.bytesPerSecond), now: now))
        shared.users = 1
        groups[group.name] = shared
        transfer.groupBucket = shared
    }

    /// Called by the write callback before it takes `bytes`; false: the transfer is now paused and
    /// the callback must return CURL_WRITEFUNC_PAUSE. A chunk needs a positive balance in the
    /// session's bucket and in its request's, and is taken from both.
    func admit(_ transfer: Transfer, bytes: Int) -> Bool {
        let group = transfer.groupBucket
        guard bytes > 0, bucket != nil || group != nil else {
            bytesAdmitted &+= Int64(bytes)
            return true
        }
        let now = Self.now()
        let sessionHas = bucket == nil || bucket!.hasBalance(now: now)
        let groupHas = group == nil || group!.bucket.hasBalance(now: now)
        if sessionHas && groupHas {
            bytesAdmitted &+= Int64(bytes)
            bucket?.take(bytes)
            group?.bucket.take(bytes)
            return true
        }
        transfer.pausedForRate = true
        paused.append(transfer)
        return false
    }

    /// When the first paused transfer is due to resume; nil when none is paused.
    var nextDeadline: Date? {
        guard !paused.isEmpty else { return nil }
        let now = Self.now()
        guard let due = paused.lazy.map({ self.resumeTime(of: $0, now: now) }).min() else { return nil }
        return Date().addingTimeInterval(max(0, due - now))
    }

    /// Resumes the paused transfers whose buckets have refilled, in the order they were paused.
    /// libcurl delivers each one's kept chunk from inside `curl_easy_pause`, so the first ones
    /// take the budget and the rest pause again at once, at the back of the line. A transfer
    /// libcurl refuses to resume fails with that error instead of waiting forever.
    func resumeIfDue() {
        guard !paused.isEmpty else { return }
        let now = Self.now()
        var waking: [Transfer] = []
        var waiting: [Transfer] = []
        for transfer in paused where transfer.pausedForRate {
            if resumeTime(of: transfer, now: now) <= now { waking.append(transfer) } else { waiting.append(transfer) }
        }
        guard !waking.isEmpty else { return }
        paused = waiting
        for transfer in waking {
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
        if let shared = transfer.groupBucket {
            shared.users -= 1
            transfer.groupBucket = nil
        }
        guard transfer.pausedForRate else { return }
        transfer.pausedForRate = false
        paused.removeAll { $0 === transfer }
    }

    private func resumeTime(of transfer: Transfer, now: Double) -> Double {
        max(bucket?.resumeTime(now: now) ?? now, transfer.groupBucket?.bucket.resumeTime(now: now) ?? now)
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// One request's token bucket, shared by its running transfers.
final class GroupBucket {
    var bucket: TokenBucket
    /// Transfers in the session that joined it.
    var users = 0
    init(_ bucket: TokenBucket) { self.bucket = bucket }
}
