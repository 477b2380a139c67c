internal import CCurl
import Foundation

/// Segmented transfers (see `SegmentSet`): which running bodies may be split, the split, the end
/// of each range, and the final hash pass.
extension TransferSession {
    /// A body at least this large may be fetched in segments: below it one connection's
    /// slow start and a request's round trip are most of what segments could save.
    public static let segmentThreshold: Int64 = 16 << 20
    /// No range is split below twice this: each range costs a request and a new connection.
    static let minimumPiece: Int64 = 1 << 20
    /// A range's tail is taken over only when its own connection would need at least this long
    /// for it (see `SegmentSet.largestRemaining`): 256 MiB over HTTPS/2 sent +3.3 % with tails
    /// of 1–3 MB stolen, when each was already in flight.
    static let stealMinimumSeconds = 1.0

    /// Running transfers whose body may be split, offered on every call until they are (a
    /// host's connections may come free later): at least `segmentThreshold` bytes in all and
    /// twice `minimumPiece` left, from a server that answered a range (206) or announced ranges
    /// (`Accept-Ranges: bytes`), under a strong validator. With the most segments each may use.
    public func splitCandidates() -> [(key: Int, maxSegments: Int)] {
        var found: [(key: Int, maxSegments: Int)] = []
        for (key, set) in segmentSets where watchWeak(set) && !set.pending.isEmpty && set.broken == nil && set.validated {
            found.append((key, set.primary.request.maxSegments))
        }
        for key in splittable {
            guard let t = running[key], segmentSets[key] == nil, !segmentsRefused.contains(key), !t.reachedStop, t.abortReason == nil,
                  let total = t.facts.rangeTotal ?? t.facts.contentLength else { splittable.remove(key); continue }
            guard total - t.bytesOnDisk >= 2 * Self.minimumPiece else { continue }
            found.append((key, t.request.maxSegments))
        }
        return found
    }

    /// Whether a body that just began may be split later (see `splitCandidates`); asked once
    /// per body, by `takeBodyStarts`, so no turn walks every transfer for it.
    func mayBeSplit(_ t: Transfer) -> Bool {
        // An upload's response is an answer, never a body to split.
        t.request.maxSegments > 1 && !t.request.segment && t.request.upload == nil && !segmentsRefused.contains(t.key)
            && t.abortReason == nil
            && (t.facts.httpStatus == 206 || (t.facts.httpStatus == 200 && t.facts.acceptsRanges))
            && SegmentSet.validator(t.facts) != nil
            && (t.facts.rangeTotal ?? (t.facts.httpStatus == 200 ? t.facts.contentLength : nil) ?? 0) >= Self.segmentThreshold
    }

    /// Splits what is left of `key`'s body into pieces, and starts up to `connections` more
    /// connections on them (never past the item's `maxSegments`): the primary stops at the end
    /// of the first, the rest wait in `pending`. Returns how many segments started.
    public func split(_ key: Int, connections: Int) -> Int {
        if let set = segmentSets[key] {
            // Pieces still pending (or a restart's kept ranges): one more connection each.
            var started = 0
            let room = set.primary.request.maxSegments - set.connections
            while started < min(connections, room), set.broken == nil, set.validated, set.mayAsk,
                  let piece = set.takePiece(minimum: Self.minimumPiece, share: set.share) {
                guard startSegment(set, from: piece.from, to: piece.to) else { set.pending.insert(piece, at: 0); break }
                started += 1
            }
            set.peakConnections = max(set.peakConnections, set.connections)
            segmentConnectionChanges[key] = set.segments.count
            return started
        }
        guard connections > 0, let primary = running[key],
              let total = primary.facts.rangeTotal ?? primary.facts.contentLength else { return 0 }
        let start = primary.bytesOnDisk
        guard total - start >= 2 * Self.minimumPiece else { return 0 }
        let set = SegmentSet(primary: primary, total: total)
        set.primaryWeak = Self.answeredWeak(primary)
        set.weakSince = ProcessInfo.processInfo.systemUptime
        if set.primaryWeak, let etag = primary.facts.etag, etag.hasPrefix("W/") { set.askWith = String(etag.dropFirst(2)) }
        set.pieceSize = SegmentSet.firstPieceSize(remaining: total - start, connections: connections + 1, minimum: Self.minimumPiece)
        // A weak set's primary keeps half (`SegmentedTransfers+Weak.swift`) until the tag is strong.
        primary.stopAt = start + (set.primaryWeak ? max(set.pieceSize, (total - start) / 2) : set.pieceSize)
        set.pending = [(primary.stopAt, total)]
        segmentSets[key] = set
        splittable.remove(key)
        while set.segments.count < connections, let piece = set.takePiece(minimum: Self.minimumPiece, share: connections + 1) {
            guard startSegment(set, from: piece.from, to: piece.to) else {
                fallBack(set, .curl(code: -1, text: "a segment could not be started"))
                return 0
            }
        }
        set.peakConnections = set.connections
        segmentConnectionChanges[key] = set.segments.count
        return set.segments.count
    }

    /// Where a request with kept ranges ends: the primary asks only up to the first of them
    /// (a closed range), or nil when they cannot be adopted (`adoptKeptRanges`).
    static func keptRangesStart(_ request: TransferRequest) -> Int64? {
        guard let ranges = request.keptRanges, let first = ranges.first?.first, ranges.last?.last != nil,
              request.ifRange != nil, first >= request.resumeFrom else { return nil }
        return first
    }

    /// A restart's kept ranges (`TransferRequest.keptRanges`): the set exists from the start,
    /// its primary stops where they begin, and what is missing of them waits for connections
    /// until the primary's response shows the same version (`checkKeptRanges`).
    func adoptKeptRanges(_ primary: Transfer) {
        guard let first = Self.keptRangesStart(primary.request), let ranges = primary.request.keptRanges,
              let total = ranges.last?.last else { return }
        let set = SegmentSet(primary: primary, total: total)
        set.validated = false
        primary.stopAt = first
        for r in ranges where r.count >= 3 {
            // The caller synced the part before starting: what is in it is durable.
            if r[1] > r[0] { set.addDone(from: r[0], to: r[1], durable: r[1]); set.finishedBytes += r[1] - r[0] }
            if r[2] > r[1] { set.pending.append((r[1], r[2])) }
        }
        segmentSets[primary.key] = set
    }

    /// A segmented item's primary began its body: of the kept ranges' version and size, their
    /// missing parts may be fetched; a whole new body (the resource changed: a 200) forgets them
    /// and is split afresh (`mayBeSplit`); anything else fails the set.
    func checkKeptRanges(_ t: Transfer) {
        guard let set = segmentSets[t.key], set.primary === t, !set.validated else { return }
        let total = t.facts.rangeTotal ?? (t.facts.httpStatus == 200 ? t.facts.contentLength : nil)
        let changed = t.request.ifRange.flatMap { t.facts.validatorContradicting($0) }
        if t.facts.httpStatus == 200, set.primaryRunning, t.abortReason == nil {
            // The body starts over: the kept ranges are of another version. The primary takes
            // the whole body (its closed range no longer holds: a 200 ignores it) and the file is
            // cut to what it wrote of it, so nothing of the old version stays past its end.
            segmentSets.removeValue(forKey: t.key)
            segmentConnectionChanges[t.key] = 0
            t.stopAt = .max
            if ftruncate(t.request.destination, off_t(t.bytesOnDisk)) != 0 { t.abortReason = .write(errno: errno) }
        } else if total != set.total || changed != nil || t.restartedFromZero {
            fallBack(set, .resourceChanged(sent: t.request.ifRange ?? "", got: changed ?? SegmentSet.validator(t.facts) ?? ""))
        } else {
            set.validated = true
        }
    }

    /// Fair shares: `key` keeps at most `keep` segment connections (`Scheduler.segmentConnectionsAllowed`).
    /// The segments with most left are stopped now, their connections closed: what each wrote
    /// stays as a finished range, the rest of its range waits in `pending` for a connection the
    /// host can spare later (or for the item's own, once its other ranges are in). Stealing
    /// stops with it. Returns how many were stopped.
    @discardableResult
    public func yieldSegments(_ key: Int, keep: Int) -> Int {
        guard let set = segmentSets[key], set.broken == nil, set.segments.count > max(0, keep) else { return 0 }
        set.stealing = false
        let leaving = set.segments.filter { $0 !== set.verifier }.sorted { ($0.stopAt - $0.bytesOnDisk) > ($1.stopAt - $1.bytesOnDisk) }
            .prefix(set.segments.count - max(0, keep))
        for s in leaving {
            gate.forget(s)
            _ = curl_multi_remove_handle(multi, s.easy.raw)
            let outcome = s.outcome(curlCode: CURLE_OK, handingOverHeld: false)
            set.overshoot += s.overshoot
            set.segments.removeAll { $0 === s }
            // A broken promise (its response was not the range asked) or a failed write: as any
            // segment's failure would. Anything else is only the cut (no headers yet: status 0).
            var broken = s.abortReason
            if case .write = outcome.failure { broken = outcome.failure }
            if let broken {
                fallBack(set, broken)
                return leaving.count
            }
            let from = s.request.resumeFrom, end = min(s.stopAt, set.total)
            let written = min(max(s.writtenOnDisk, from), end)
            if written > from {
                set.finishedBytes += written - from
                set.addDone(from: from, to: written, durable: min(written, max(from, s.durableOnDisk)))
            }
            if written < end { set.pending.append((written, end)) }
        }
        set.pending.sort { $0.from < $1.from }
        segmentConnectionChanges[key] = set.segments.count
        return leaving.count
    }

    func startSegment(_ set: SegmentSet, from: Int64, to: Int64, verifyInto: Int32? = nil) -> Bool {
        let primary = set.primary
        guard let validator = set.askWith ?? SegmentSet.validator(primary.facts) ?? primary.request.ifRange else { return false }
        // A closed range: the server sends exactly it (the body's end included, where an open
        // range would do the same: then the connection ends by itself, not cut).
        var request = primary.request.segment(from: from, to: min(to, set.total), validator: validator)
        if let verifyInto { request.destination = verifyInto; request.verifying = true }
        do {
            let easy = try EasyHandle()
            // Checkpoints as the primary's: each range's durable extent goes into `B.state`.
            let t = Transfer(key: set.key, easy: easy, request: request, proxies: proxies, gate: gate,
                             checkpoints: verifyInto == nil ? checkpoints : nil)
            t.stopAt = to
            try configure(easy, for: t, maxRecvSpeed: 0)
            // A connection of its own: a throttling server caps each connection, not each stream;
            // a finished piece's connection carries the next one (`configurePieceConnection`).
            try configurePieceConnection(easy, behind: primary)
            // A request's own `max-rate:` holds over all of its item's connections.
            gate.join(t, group: primary.request.rateGroup)
            guard curl_multi_add_handle(multi, easy.raw) == CURLM_OK else { gate.forget(t); return false }
            set.segments.append(t)
            if verifyInto != nil { set.verifier = t }
            return true
        } catch {
            return false
        }
    }

    /// A transfer of a segmented item ended (its handle is out of the multi handle already).
    func segmentEnded(_ set: SegmentSet, _ t: Transfer, code: CURLcode) {
        var outcome = t.outcome(curlCode: code)
        set.overshoot += t.overshoot
        if t === set.primary {
            set.primaryRunning = false
            if outcome.failure == nil, t.reachedStop, let broken = set.broken {
                // It stopped at its range's end as a segment broke the set: the rest is missing.
                outcome.failure = broken
                outcome.sha256 = nil
                finish(set, outcome)
                return
            } else if outcome.failure == nil, t.reachedStop {
                set.prefix = outcome
                // From here the ranges after the primary's are hashed as they come in.
                let follower = PrefixFollower(fd: t.request.destination, from: outcome.bytesOnDisk, sha: outcome.hashState.sha)
                for r in set.doneRanges { follower.add(from: r.from, to: r.to) }
                set.follower = follower
                // A weak set's check of these bytes takes this connection, if it may start now.
                if set.primaryWeak { primaryOfWeakSetEnded(set, at: outcome.bytesOnDisk) }
                if set.verifier == nil { steal(set) }
            } else {
                // Done alone after a fallback, or failed: it is the item's outcome either way. A
                // failure that broke no promise (a cut connection, an expired URL) keeps the ranges
                // in the file, for the next attempt to fetch only what is missing of them.
                let kept = stopAndKeep(set)
                if outcome.failure != nil && set.broken != nil { segmentsRefused.insert(set.key) }
                if let failure = outcome.failure, set.broken == nil, !kept.isEmpty, !failure.discardsPartial {
                    outcome.keptRanges = kept
                }
                outcome.facts.connections = 1
                finish(set, outcome)
                return
            }
        } else {
            set.segments.removeAll { $0 === t }
            let end = min(t.stopAt, set.total)
            if notStrongYet(set, t) || t === set.verifier { return verifierEnded(set, t, outcome) }
            if outcome.failure == nil, t.bytesOnDisk == end {
                set.finishedBytes += end - t.request.resumeFrom
                set.addDone(from: t.request.resumeFrom, to: end, durable: min(end, t.durableOnDisk))
                let now = ProcessInfo.processInfo.systemUptime
                set.learn(size: end - t.request.resumeFrom, seconds: now - t.startedAt,
                          firstByte: Double(t.easy.offset(CURLINFO_STARTTRANSFER_TIME_T)) / 1e6, minimum: Self.minimumPiece)
                steal(set)
            } else {
                fallBack(set, outcome.failure ?? .curl(code: 18, text: "segment ended at \(t.bytesOnDisk), expected \(end)"))
                return
            }
        }
        segmentConnectionChanges[set.key] = set.segments.count
        completeIfWhole(set)
    }

    /// Half of the largest remaining range goes to a new segment, if worth it and allowed.
    private func steal(_ set: SegmentSet) {
        // A kept range still missing comes first; it is the item's own work, so it goes on even
        // when no connection may be taken for more.
        if set.broken == nil, set.validated, set.mayAsk, set.stealing || set.connections == 0, let piece = set.takePiece(minimum: Self.minimumPiece, share: set.share) {
            if !startSegment(set, from: piece.from, to: piece.to) { fallBack(set, .curl(code: -1, text: "a segment could not be started")) }
            set.peakConnections = max(set.peakConnections, set.connections)
            return
        }
        guard set.stealing, set.broken == nil, set.validated,
              let (victim, at) = set.largestRemaining(minimumPiece: Self.minimumPiece, minimumSeconds: Self.stealMinimumSeconds,
                                                      now: ProcessInfo.processInfo.systemUptime) else { return }
        let end = victim.stopAt
        victim.stopAt = at
        if !startSegment(set, from: at, to: end) { victim.stopAt = end }
        set.peakConnections = max(set.peakConnections, set.connections)
    }

    /// A promise broke (or a segment failed): stop every segment; the primary, if it still runs,
    /// carries the rest alone; else the item fails with `failure` and is not split again.
    func fallBack(_ set: SegmentSet, _ failure: TransferFailure) {
        set.broken = set.broken ?? failure
        set.pending.removeAll()
        segmentsRefused.insert(set.key)
        stopSegments(set)
        segmentConnectionChanges[set.key] = 0
        if set.primaryRunning && set.primary.request.rangeEnd == nil {
            set.primary.stopAt = .max
        } else if set.primaryRunning {
            // Its request ends where the kept ranges began: it cannot carry the rest alone.
            gate.forget(set.primary)
            _ = curl_multi_remove_handle(multi, set.primary.easy.raw)
            set.primaryRunning = false
            var outcome = set.primary.outcome(curlCode: CURLE_OK, handingOverHeld: false)
            set.overshoot += set.primary.overshoot
            outcome.failure = failure
            outcome.sha256 = nil
            finish(set, outcome)
        } else if var outcome = set.prefix {
            outcome.failure = failure
            outcome.sha256 = nil
            finish(set, outcome)
        }
    }

    private func stopSegments(_ set: SegmentSet) {
        for s in set.segments {
            gate.forget(s)
            _ = curl_multi_remove_handle(multi, s.easy.raw)
            _ = s.outcome(curlCode: CURLE_OK, handingOverHeld: false)
            set.overshoot += s.overshoot
        }
        set.segments.removeAll()
    }

    /// Stops every segment and returns the ranges past the in-order prefix as far as they are in
    /// the file now (`[from, done, to]`, every writer settled), pending ones included.
    private func stopAndKeep(_ set: SegmentSet) -> [[Int64]] {
        for s in set.segments {
            gate.forget(s)
            _ = curl_multi_remove_handle(multi, s.easy.raw)
            _ = s.outcome(curlCode: CURLE_OK, handingOverHeld: false)
            set.overshoot += s.overshoot
        }
        let ranges = set.extents.ranges.map { Array($0.prefix(3)) }
        set.segments.removeAll()
        return ranges
    }

    /// Every range is in: the follower hashes what it has not yet, off this thread.
    func completeIfWhole(_ set: SegmentSet) {
        guard !set.hashing, !set.primaryRunning, set.segments.isEmpty, set.pending.isEmpty, set.broken == nil, set.verified || !set.primaryWeak,
              set.prefix != nil, let follower = set.follower else { return }
        set.hashing = true
        let results = hashResults, waker = waker, key = set.key
        follower.finish(total: set.total) { result in
            results.append(key: key, result)
            waker.wake()
        }
    }

    /// Hash passes that ended since the last call: their items' outcomes go to `finishedOutcomes`.
    func completeHashedSets() {
        for (key, result) in hashResults.take() {
            guard let set = segmentSets[key], set.hashing, var outcome = set.prefix else { continue }
            switch result {
            case .success(let (digest, state)):
                outcome.sha256 = digest
                outcome.hashState = state
                outcome.bytesOnDisk = set.total
                outcome.bytesReceived += set.finishedBytes
                outcome.facts.connections = set.peakConnections
            case .failure(let error):
                outcome.failure = .write(errno: error.errno)
                outcome.sha256 = nil
            }
            finish(set, outcome)
        }
    }

    /// The item's outcome: the set is gone, and the outcome is handed out by `performTransfers`.
    private func finish(_ set: SegmentSet, _ outcome: TransferOutcome) {
        set.follower?.cancel()
        var outcome = forgetUnverified(set, outcome)
        outcome.partHasMore = outcome.failure != nil
        outcome.overshootBytes = set.overshoot
        segmentSets.removeValue(forKey: set.key)
        running.removeValue(forKey: set.key)
        segmentConnectionChanges[set.key] = 0
        finishedOutcomes.append(outcome)
    }

    /// Stops a segmented item (pause, cancel, shutdown): its outcome as `.cancelled`, with the
    /// in-order prefix as what a resume builds on.
    func removeSegmented(_ set: SegmentSet) -> TransferOutcome {
        // Not yet validated: the ranges kept before are still all there is (nothing was added).
        let kept = set.broken != nil ? [] : set.validated ? stopAndKeep(set) : (set.primary.request.keptRanges ?? [])
        stopSegments(set)
        set.follower?.cancel()
        segmentSets.removeValue(forKey: set.key)
        running.removeValue(forKey: set.key)
        segmentConnectionChanges[set.key] = 0
        var outcome: TransferOutcome
        if set.primaryRunning {
            gate.forget(set.primary)
            _ = curl_multi_remove_handle(multi, set.primary.easy.raw)
            outcome = set.primary.outcome(curlCode: CURLE_OK, handingOverHeld: false)
        } else {
            outcome = set.prefix!
        }
        outcome.failure = .cancelled
        outcome.sha256 = nil
        outcome.partHasMore = true
        // What the ranges hold stays for the next start (a pause, a stop): it fetches the rest.
        if !kept.isEmpty { outcome.keptRanges = kept }
        outcome = forgetUnverified(set, outcome)
        outcome.overshootBytes = set.overshoot
        return outcome
    }
}
