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
/// The body is handed out in pieces, in order (`pending`, carved by `takePiece`): the primary
/// takes the first, each connection that finishes one takes the next. So the contiguous prefix
/// grows with the body, and `follower` hashes each finished range as soon as all before it are
/// hashed (read back from the file, so the digest is of the file on disk, whole): at the end
/// only the last pieces remain to hash. A piece's size is learnt from the responses' pace
/// (`learn`): see there.
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
    /// The primary's 200 came while its Last-Modified was not yet a strong validator (see
    /// `SegmentedTransfers+Weak.swift`): its bytes are checked by `verifier` before the end.
    var primaryWeak = false
    /// A segment's 206 showed the validator strong; the primary was cut soon after.
    var strongSeen = false
    /// The primary's bytes hashed again under the strong validator matched (or needed no check).
    var verified = false
    /// The segment that fetches the primary's range again into `verifyFD`, to compare hashes.
    var verifier: Transfer?
    /// Where the primary ended: the verifier's range is `0..<verifyEnd`.
    var verifyEnd: Int64?
    /// Set while the primary's connection is being handed to the verifier.
    var connectionFree = false
    var verifyFD: Int32 = -1
    /// Segments answered 200 (validator not strong yet): their ranges wait until this uptime.
    var notBefore = 0.0
    var weakRetries = 0
    /// When the weak set was split (uptime): its asks again end `weakWaitAllowed` later.
    var weakSince = 0.0
    /// What a weak set's segments send in `If-Range`: its weak ETag's opaque tag, made strong.
    var askWith: String?
    /// The hash pass is under way.
    var hashing = false
    /// Hashes the finished ranges past the primary's in order, from when the primary's range is
    /// in (see `PrefixFollower`).
    var follower: PrefixFollower?
    /// Bytes of the next piece `takePiece` hands out.
    var pieceSize: Int64 = SegmentSet.maximumPiece
    /// The fastest pace (bytes/s, request to last byte) of a finished piece, the largest piece
    /// that came at least a quarter as fast, and the size pieces stay at once a larger one came
    /// much slower (see `learn`).
    private var fastestPace = 0.0
    private var largestFast: Int64 = 0
    private(set) var ceiling: Int64?

    deinit { if verifyFD >= 0 { close(verifyFD) } }

    init(primary: Transfer, total: Int64) {
        key = primary.key
        self.primary = primary
        self.total = total
    }

    var connections: Int { segments.count + (primaryRunning ? 1 : 0) }

    /// The connections the pieces are shared between: the most in use at once, and one more
    /// than those running (the one asking).
    var share: Int { max(peakConnections, connections + 1) }

    /// Where the body stands, for `B.state`: the in-order prefix, and `[from, done, to, durable]`
    /// of every range after it, in order (`[from, done)` is in the file, `[from, durable)` of it
    /// synced).
    var extents: (prefix: Int64, ranges: [[Int64]]) {
        var ranges = doneRanges.map { [$0.from, $0.to, $0.to, $0.durable] } + pending.map { [$0.from, $0.from, $0.to, $0.from] }
        ranges += segments.map { [$0.request.resumeFrom, $0.writtenOnDisk, min($0.stopAt, total), $0.durableOnDisk] }
        ranges = ranges.filter { $0[0] < $0[2] }.sorted { $0[0] < $1[0] }
        // A range with nothing written yet (a piece not handed out) joins the one before it, as
        // its missing tail: a restart reads each range's `done` as a length the part must have.
        var joined: [[Int64]] = []
        for r in ranges {
            if r[1] == r[0], let last = joined.last, last[2] == r[0] { joined[joined.count - 1][2] = r[2] } else { joined.append(r) }
        }
        return (primaryRunning ? primary.writtenOnDisk : (prefix?.bytesOnDisk ?? 0), joined)
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
        let candidates = segments.filter { $0 !== verifier } + (primaryRunning && prefix == nil ? [primary] : [])
        guard let victim = candidates.max(by: { ($0.stopAt - $0.bytesOnDisk) < ($1.stopAt - $1.bytesOnDisk) }) else { return nil }
        let left = victim.stopAt - victim.bytesOnDisk
        guard victim.stopAt != .max, left >= 2 * minimumPiece else { return nil }
        let elapsed = now - victim.startedAt
        let rate = Double(victim.bytesOnDisk - victim.request.resumeFrom) / max(elapsed, 1e-3)
        guard elapsed > 0.25, Double(left) >= rate * minimumSeconds else { return nil }
        return (victim, victim.bytesOnDisk + left / 2)
    }

    /// Pieces grow to this at most, unless a request's turnaround is long (`learn`): the hash
    /// follows the prefix, so what is left at the end is about a piece per connection.
    static let maximumPiece: Int64 = 8 << 20

    /// The size of the first pieces: a quarter of each connection's share, within 2–8 MiB (at
    /// least twice the minimum: a piece must be long enough for a checkpoint, `--sync-every`,
    /// to make part of it durable while it runs).
    static func firstPieceSize(remaining: Int64, connections: Int, minimum: Int64) -> Int64 {
        min(maximumPiece, max(2 * minimum, remaining / Int64(4 * max(1, connections))))
    }

    /// The next piece of the first pending range, and what remains of the range stays first. Up
    /// to `pieceSize`, and no more than half of what is pending per connection (`share`), so the
    /// last pieces shrink and the connections end together instead of one carrying a long tail
    /// alone; a rest under `minimum` goes with it.
    func takePiece(minimum: Int64, share: Int) -> (from: Int64, to: Int64)? {
        guard let first = pending.first else { return nil }
        let left = pending.reduce(0) { $0 + ($1.to - $1.from) }
        let cut = first.from + min(pieceSize, max(minimum, left / Int64(2 * max(1, share))))
        if cut + minimum > first.to { pending.removeFirst(); return first }
        pending[0].from = cut
        return (first.from, cut)
    }

    /// A range `[from, to)` is in the file (`durable`: how far of it is synced): kept, and handed
    /// to the follower.
    func addDone(from: Int64, to: Int64, durable: Int64) {
        guard to > from else { return }
        follower?.add(from: from, to: to)
        doneRanges.append((from, to, durable))
    }

    /// Learns a piece's size from the responses' pace. A finished piece of `size` bytes took
    /// `seconds` from its request, `firstByte` of them before its first byte. Some servers let a
    /// short request through at the path's speed and hold longer ones to their rate: nginx's
    /// `limit_rate` allows `rate × (elapsed + 1 s) − sent` per write (with `sendfile`, up to 2 MiB)
    /// and waits `written ÷ rate` after each, but not after the write that ends the response. When a piece larger than every fast one came at under a quarter of
    /// the fastest pace, pieces stay at the largest fast size from then on. Otherwise they double,
    /// up to `maximumPiece`, or to 16 turnarounds' worth of bytes where a request's turnaround is
    /// long (a distant server: a piece must be worth its round trip and new connection).
    func learn(size: Int64, seconds: Double, firstByte: Double, minimum: Int64) {
        let pace = Double(size) / max(seconds, 1e-4)
        let fast = pace * 4 >= fastestPace
        fastestPace = max(fastestPace, pace)
        if fast { largestFast = max(largestFast, size) }
        if ceiling == nil, !fast, size > largestFast, largestFast > 0 { ceiling = max(minimum, largestFast) }
        if let ceiling { pieceSize = ceiling; return }
        guard fast else { return }
        let worth = Int64(pace * firstByte * 16)
        pieceSize = max(pieceSize, min(max(Self.maximumPiece, worth), 2 * size))
    }

    /// The validator every segment's `If-Range` carries: a strong ETag, else Last-Modified.
    static func validator(_ facts: ResponseFacts) -> String? {
        if let etag = facts.etag, !etag.hasPrefix("W/") { return etag }
        return facts.lastModified
    }
}
