import Crypto
import Foundation

/// Segments of a body whose first answer carried no strong validator (RFC 9110 §8.8.2.2, §13.1.5).
///
/// A file written under a second ago gets a weak ETag from Apache (`W/"…"`, its opaque tag the
/// file's size and mtime), and a Last-Modified that `If-Range` accepts only a minute later; a
/// client that sends either gets `200` to every range. Here the segments send the opaque tag made
/// strong (`"…"`): the server answers `206` only once its own tag is strong and the same, which
/// vouches for the bytes it sends. Until then a `200` of the same Last-Modified and length is
/// "not strong yet": none of its bytes are written, its range is asked again a moment later
/// (`weakRetriesAllowed` times at most, then one stream as before), and the first `206` cuts
/// the primary a piece later. The primary's own bytes came under the weak validator, so a rewrite
/// in the same tick could have changed them while the ranges are of the new version: a
/// `verifier` segment fetches the primary's range again under the strong tag into a scratch file,
/// and its SHA-256 must equal the primary's, or the item fails `resource-changed` and starts
/// over from byte 0. Nothing is published that a strong validator did not vouch for.
extension TransferSession {
    /// How long after the split ranges are asked again after a `200` before the set gives up
    /// (one stream, as before): Apache's tag is strong a second after the file's mtime.
    static let weakWaitAllowed = 3.0
    /// And at most this many such asks in all (bounded however fast the `200`s come).
    static let weakRetriesAllowed = 100
    /// Pause between such asks: the date turns strong at most a second (and a tick) after `Date`.
    static let weakRetryPause = 0.25

    /// The primary's `200` came with no strong validator: a weak ETag, or a Last-Modified less
    /// than a second before `Date` (or without `Date`, when nothing tells). Its bytes need checking.
    static func answeredWeak(_ primary: Transfer) -> Bool {
        let facts = primary.facts
        guard facts.httpStatus == 200, primary.request.resumeFrom == 0, SegmentSet.validator(facts) == facts.lastModified else { return false }
        if facts.etag?.hasPrefix("W/") == true { return true }
        guard let modified = facts.lastModified.flatMap(HTTPDate.parse) else { return false }
        guard let date = facts.date.flatMap(HTTPDate.parse) else { return true }
        return date.timeIntervalSince(modified) < 1
    }

    /// Called for every set each turn: the first `206` of a weak set shows the tag strong, and
    /// the primary (whose bytes all need checking) is cut a piece later; once it has ended and
    /// the tag is strong, its range is fetched again (`verifier`). Always true.
    func watchWeak(_ set: SegmentSet) -> Bool {
        guard set.primaryWeak, set.broken == nil else { return true }
        if !set.strongSeen, set.segments.contains(where: { $0.facts.httpStatus == 206 }) {
            set.strongSeen = true
            let primary = set.primary
            let cut = primary.bytesOnDisk + Self.minimumPiece
            if set.primaryRunning, set.prefix == nil, cut < primary.stopAt {
                set.pending.append((cut, primary.stopAt))
                set.pending.sort { $0.from < $1.from }
                primary.stopAt = cut
            }
        }
        // Within the item's connections: in the primary's place, or one another range gave up.
        if set.strongSeen, set.verifier == nil, !set.verified, let end = set.verifyEnd, set.mayAsk,
           set.connectionFree || set.connections < set.peakConnections {
            startVerifier(set, upTo: end)
        }
        return true
    }

    /// A segment of a weak set answered `200` of the same version: its range waits (nothing of it
    /// was written: a segment writes only a `206`). False when that is not the case, or too often.
    func notStrongYet(_ set: SegmentSet, _ t: Transfer) -> Bool {
        guard set.primaryWeak, t.facts.httpStatus == 200, case .rangeMismatch = t.abortReason,
              t.facts.lastModified == set.primary.facts.lastModified, t.facts.contentLength == set.total,
              set.weakRetries < Self.weakRetriesAllowed,
              ProcessInfo.processInfo.systemUptime < set.weakSince + Self.weakWaitAllowed else { return false }
        set.weakRetries += 1
        set.notBefore = ProcessInfo.processInfo.systemUptime + Self.weakRetryPause
        if t === set.verifier {
            // Asked again by `watchWeak` (`verifierEnded` calls it: at once when nothing else runs).
            set.verifier = nil
            return true
        }
        set.pending.append((t.request.resumeFrom, min(t.stopAt, set.total)))
        set.pending.sort { $0.from < $1.from }
        return true
    }

    /// The primary of a weak set ended at `end`: its bytes `0..<end` are to be fetched again into
    /// a scratch file under the strong tag, now if a `206` showed it strong, else by `watchWeak`.
    func primaryOfWeakSetEnded(_ set: SegmentSet, at end: Int64) {
        set.verifyEnd = end
        set.connectionFree = true
        _ = watchWeak(set)
        set.connectionFree = false
    }

    private func startVerifier(_ set: SegmentSet, upTo end: Int64) {
        if set.verifyFD < 0 {
            var name = Array((NSTemporaryDirectory() + "/spoolfetch-verify-XXXXXX").utf8CString)
            let fd = mkstemp(&name)
            guard fd >= 0 else { return fallBack(set, .write(errno: errno)) }
            unlink(name)
            set.verifyFD = fd
        }
        guard startSegment(set, from: 0, to: end, verifyInto: set.verifyFD) else {
            return fallBack(set, .curl(code: -1, text: "a segment could not be started"))
        }
        set.peakConnections = max(set.peakConnections, set.connections)
    }

    /// The verifier ended (or a `200` was put back by `notStrongYet`): equal hashes let the set
    /// complete; anything else fails it — the body is fetched again from byte 0.
    func verifierEnded(_ set: SegmentSet, _ t: Transfer, _ outcome: TransferOutcome) {
        if t === set.verifier {
            set.verifier = nil
            let end = min(t.stopAt, set.total)
            guard outcome.failure == nil, t.bytesOnDisk == end, let got = outcome.sha256, let want = set.prefix?.sha256 else {
                return fallBack(set, outcome.failure ?? .curl(code: 18, text: "check of bytes 0-\(end) ended at \(t.bytesOnDisk)"))
            }
            guard got == want else {
                let sent = t.request.ifRange ?? ""
                return fallBack(set, .resourceChanged(sent: sent, got: sent))
            }
            set.verified = true
        }
        segmentConnectionChanges[set.key] = set.segments.count
        _ = watchWeak(set)
        completeIfWhole(set)
    }

    /// An outcome that is not the finished item: a primary's bytes no strong validator vouched
    /// for are not kept for a resume (which would append ranges of a newer version to them).
    func forgetUnverified(_ set: SegmentSet, _ outcome: TransferOutcome) -> TransferOutcome {
        guard set.primaryWeak, !set.verified, outcome.sha256 == nil else { return outcome }
        var outcome = outcome
        _ = ftruncate(set.primary.request.destination, 0)
        outcome.bytesOnDisk = 0
        outcome.keptRanges = nil
        outcome.hashState = HashState(SHA256())
        return outcome
    }
}

extension SegmentSet {
    /// Whether a waiting range may be asked now: after `notBefore`, or at once when no
    /// connection of the item runs (nothing else would turn the engine to ask it later).
    var mayAsk: Bool {
        connections == 0 || ProcessInfo.processInfo.systemUptime >= notBefore
    }
}
