import Crypto
import Foundation

/// One large body fetched as several ranges over several connections into one file.
///
/// The item's own transfer (the primary) goes on from where it started, in order, hashing as it
/// writes, and stops at the end of its range (cut there: its request was open); each segment
/// asks a closed range, `Range: bytes=FROM-LAST`, with `If-Range` of the primary's one validator
/// on a connection of its own (HTTP/1.1, not reused), so the server sends nothing past it. When
/// a range finishes, the largest remaining one is split and its upper half goes to a new segment
/// (work stealing): the victim is cut at its new end, and what its server had already sent past
/// it is the only byte sent twice (`overshoot`; the split's minimum keeps it to a few per cent
/// of the body). A segment that gets anything but a
/// 206 of its own range under that validator breaks the set: every segment stops, the primary
/// (if it still runs) goes on alone to the end, overwriting what segments wrote; if it had
/// already stopped, the item fails with that reason and is fetched as one stream next time.
/// When all ranges are in, the bytes after the primary's range are read back and hashed in
/// order (`HashPass`), so the digest is of the file on disk, whole.
final class SegmentSet {
    let key: Int
    let total: Int64
    /// The primary while it runs (also while it stopped at its range's end: then `prefix` is set).
    let primary: Transfer
    var primaryRunning = true
    /// The primary's outcome once it reached its range's end: the in-order prefix and its hash.
    var prefix: TransferOutcome?
    var segments: [Transfer] = []
    /// Ranges no connection fetches yet (kept from before a restart: what is missing of them).
    var pending: [(from: Int64, to: Int64)] = []
    /// Ranges in the file whole: finished segments', and what a restart kept; `durable`: how far
    /// from `from` a sync has made it outlive a power cut.
    var doneRanges: [(from: Int64, to: Int64, durable: Int64)] = []
    /// Whether the primary's response showed the kept ranges' version (`checkKeptRanges`): only
    /// then are they resumed (a set made by a split is of the primary's version from the start).
    var validated = true
    /// Body bytes received past the ends of ranges and dropped, over every connection so far.
    var overshoot: Int64 = 0
    /// Bytes of segments that finished their range.
    var finishedBytes: Int64 = 0
    /// Most connections in use at once, the primary's included (for the marker).
    var peakConnections = 1
    /// Set when a segment broke a promise or failed: no more segments.
    var broken: TransferFailure?
    /// Whether a finished range may take over half of the largest remaining one (false while
    /// other items of the host wait for a connection).
    var stealing = true
    /// The hash pass is under way.
    var hashing = false

    init(primary: Transfer, total: Int64) {
        key = primary.key
        self.primary = primary
        self.total = total
    }

    var connections: Int { segments.count + (primaryRunning ? 1 : 0) }

    /// Where the body stands, for `B.state`: the in-order prefix, and `[from, done, to, durable]`
    /// of every range after it, in order (`[from, done)` is in the file, `[from, durable)` of it
    /// synced).
    var extents: (prefix: Int64, ranges: [[Int64]]) {
        var ranges = doneRanges.map { [$0.from, $0.to, $0.to, $0.durable] } + pending.map { [$0.from, $0.from, $0.to, $0.from] }
        ranges += segments.map { [$0.request.resumeFrom, $0.writtenOnDisk, min($0.stopAt, total), $0.durableOnDisk] }
        ranges = ranges.filter { $0[0] < $0[2] }.sorted { $0[0] < $1[0] }
        return (primaryRunning ? primary.writtenOnDisk : (prefix?.bytesOnDisk ?? 0), ranges)
    }

    /// Bytes written so far, over every range.
    var bytesOnDisk: Int64 {
        let first = primaryRunning ? primary.bytesOnDisk : (prefix?.bytesOnDisk ?? 0)
        return segments.reduce(first + finishedBytes) { $0 + ($1.bytesOnDisk - $1.request.resumeFrom) }
    }

    /// The running range with the most bytes left, and where it would be split: nil when none is
    /// worth a new request. Worth it means at least twice `minimumPiece` left, and at least
    /// `minimumSeconds` of the victim's own rate: what its server has already sent into the
    /// connection (socket buffers, an HTTP/2 window: megabytes on a fast path) arrives anyway and
    /// is sent twice once the tail goes to another connection, so a tail the victim finishes soon
    /// is left to it. A throttled connection (4 MB/s) has little in flight and long tails: those
    /// are split.
    func largestRemaining(minimumPiece: Int64, minimumSeconds: Double, now: Double) -> (Transfer, at: Int64)? {
        let candidates = segments + (primaryRunning && prefix == nil ? [primary] : [])
        guard let victim = candidates.max(by: { ($0.stopAt - $0.bytesOnDisk) < ($1.stopAt - $1.bytesOnDisk) }) else { return nil }
        let left = victim.stopAt - victim.bytesOnDisk
        guard victim.stopAt != .max, left >= 2 * minimumPiece else { return nil }
        let elapsed = now - victim.startedAt
        let rate = Double(victim.bytesOnDisk - victim.request.resumeFrom) / max(elapsed, 1e-3)
        guard elapsed > 0.25, Double(left) >= rate * minimumSeconds else { return nil }
        return (victim, victim.bytesOnDisk + left / 2)
    }

    /// The validator every segment's `If-Range` carries: a strong ETag, else Last-Modified.
    static func validator(_ facts: ResponseFacts) -> String? {
        if let etag = facts.etag, !etag.hasPrefix("W/") { return etag }
        return facts.lastModified
    }
}

/// Reads `[from, to)` of a file back and feeds it to a hash, on a thread of its own, then calls
/// `done` with the digest and the final state (or the errno of a failed read).
enum HashPass {
    static func start(fd: Int32, from: Int64, to: Int64, sha: SHA256,
                      done: @escaping @Sendable (Result<(String, HashState), ReadError>) -> Void) {
        let own = dup(fd)
        let start = HashState(sha)
        let thread = Thread {
            defer { if own >= 0 { close(own) } }
            guard own >= 0 else { done(.failure(ReadError(errno: errno))); return }
            var sha = start.sha
            let size = 1 << 20
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 4096)
            defer { buffer.deallocate() }
            var offset = from
            while offset < to {
                let n = pread(own, buffer.baseAddress, min(size, Int(to - offset)), off_t(offset))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { done(.failure(ReadError(errno: n == 0 ? EIO : errno))); return }
                sha.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                offset += Int64(n)
            }
            let state = HashState(sha)
            done(.success((Hex.encode(sha.finalize()), state)))
        }
        thread.name = "spoolfetch-hash"
        thread.start()
    }

    struct ReadError: Error { let errno: Int32 }
}
