import Foundation
import SpoolCore
import Logging
import SpoolConfiguration
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// Starts, stops and pauses transfers for items: prepares the staging part (fresh, or resumed with
/// `Range` + `If-Range`), applies the size limits, shares `--max-rate`, and keeps each item's
/// partial and resume state up to date. The only part of the engine that talks to the transfer
/// session.
final class TransferDriver {
    let session: TransferSession
    let store: SpoolStore
    /// Read for limits and rates at each start; a reload replaces it (`update`).
    private(set) var configuration: DaemonConfiguration
    let logger: Logger
    /// How URLs are written down; fixed for the daemon's life (`keep-url-queries` takes a restart).
    let urls: URLPrivacy
    /// The content store (`--store`), nil when off: a body may come from it instead of a
    /// transfer, and its hashed mirrors are asked first (see `ContentStoreRoom`).
    var contentStore: ContentStoreRoom?
    /// Items whose transfer is in the session, by key.
    var running: [Int: ItemRecord] = [:]
    /// The daemon-wide rate in force (bytes per second, 0: none) and when the schedule changes it.
    private(set) var rateInForce: Int64 = 0
    private(set) var rateChangesAt: Date?
    private var scheduleApplied = false
    /// Items whose body is fetched in segments now, with their ranges (`ItemState.segments`).
    private var segmented: [Int: Int] = [:]
    private var segmentStateWritten: [Int: Date] = [:]
    /// Writes the small bodies transfers leave unwritten, off the engine's thread.
    private let writer = PartWriter()

    /// Bodies smaller than this are simply fetched again after a crash: no `B.state` is written
    /// when they begin.
    static let resumeStateThreshold: Int64 = 1 << 20

    /// Sets up the transfer session (one libcurl multi handle) for `configuration`.
    init(configuration: DaemonConfiguration, store: SpoolStore, logger: Logger) throws(DaemonError) {
        var transferConfiguration = TransferConfiguration()
        transferConfiguration.stallTimeout = configuration.stallTimeout
        transferConfiguration.caFile = configuration.caFile
        transferConfiguration.caPath = configuration.caPath
        transferConfiguration.netrcFile = configuration.netrcFile
        transferConfiguration.egressPolicy = configuration.egressPolicy
        // One token bucket for the whole session (checked in every write callback), so the cap
        // holds over many small transfers and many concurrent ones alike.
        transferConfiguration.maxRate = configuration.maxRate.rate(at: Date(), in: .current)
        // libcurl's own bound is the most any host may grow to; the scheduler holds each host to its limit.
        transferConfiguration.maxHostConnections = max(configuration.perHost, configuration.perHostMax)
        // And `--concurrency` is libcurl's bound on connections in all: the scheduler counts an
        // HTTP/2 host's requests as one connection, but a server that allows few streams per
        // connection makes libcurl open more for them (issue 61: 16 to lighttpd's 8 streams with
        // `--concurrency 4`). Past it, a request waits for a free stream or connection.
        transferConfiguration.maxConnections = configuration.concurrency
        transferConfiguration.maxStreams = configuration.maxStreams
        do { session = try TransferSession(configuration: transferConfiguration) } catch { throw .transfer(error) }
        self.store = store
        self.configuration = configuration
        self.logger = logger
        urls = URLPrivacy(keepsQueries: configuration.keepURLQueries)
        applyRateSchedule(now: Date())
    }

    /// Opens (or reuses) the item's part and adds its transfer to the session. A resumed part
    /// whose hash was lost in a restart is re-hashed first. `item` is the record's full
    /// description (`ItemRecord.load()`).
    /// `credentials`: header lines from `--credentials-dir`, read for this start only; they take
    /// the place of the request's own headers of the same name.
    /// `partOpened` hands a part it opened to the item's machine (the running phase holds it).
    /// `hashedMirror`: a `--hashed-mirror` URL to ask instead of the item's own, with none of the
    /// item's headers or credentials (they are for its own server).
    func start(_ record: ItemRecord, _ item: RequestItem, credentials: [RequestHeader] = [], hashedMirror: String? = nil,
               partOpened: (StagingFile) -> Void) throws(StoreError) {
        let firstStart = record.startedAt == nil
        record.noteStarted(at: Date())
        // The part opened here is used at once; the machine takes it with `partOpened`, an event
        // handled after the effect that started this transfer (events never nest).
        let part: StagingFile
        if let held = record.part {
            part = held
        } else {
            // A waiting item holds no part (its phase does not): the same file is reopened when
            // it still holds the bytes counted — cut back to them: a write cut short by a full
            // disk may have left a few more — else the attempt starts from byte 0.
            if record.bytesOnDisk > 0, let kept = try store.openPartIfPresent(record.base), kept.size >= record.bytesOnDisk {
                if kept.size > record.bytesOnDisk && record.keptRanges == nil { try kept.truncate(to: record.bytesOnDisk) }
                part = kept
            } else {
                // A small body's first attempt: its part starts unnamed and is published without
                // ever having a staging name. Not for a later attempt, nor an item with a state
                // file: a named part of theirs may be on disk, and only a named create replaces it.
                let unnamed = firstStart && !record.hasStateFile && (record.expectedBytes ?? 0) < Self.resumeStateThreshold
                part = try store.openPart(record.base, fresh: true, unnamed: unnamed)
                record.partial.emptied()
            }
            partOpened(part)
        }
        // Bytes an earlier attempt left unwritten (its publish failed, or its body was refused)
        // go into the file before it is resumed or cut back.
        try part.writeUnwritten()
        var resumeFrom: Int64 = 0
        if record.bytesOnDisk > 0, record.validator != nil {
            if record.hash == nil {
                do { record.partial.rehashed(try HashState.ofPrefix(fd: part.fd, length: record.bytesOnDisk)) } catch {
                    throw StoreError("pread", store.partPath(record.base), errno: error.errno)
                }
            }
            resumeFrom = record.bytesOnDisk
            // The prefix a resume builds on must outlive a power cut: the state written when the
            // response begins says it is synced (`ItemState.syncedBytes`). Only resumes pay this,
            // and a part kept by `saveResumeState` is synced already.
            _ = try part.syncedLength()
        } else if record.keptRanges != nil, record.validator != nil {
            // Kept ranges with no prefix before them: synced as a resume's prefix would be.
            _ = try part.syncedLength()
        } else if record.keptRanges == nil && (record.bytesOnDisk > 0 || part.size > 0) {
            try part.truncate(to: 0)
            record.partial.emptied()
        }
        let request = transferRequest(record, item, credentials: credentials,
                                      body: .download(part, resumeFrom: resumeFrom, hashedMirror: hashedMirror))
        // Every state written from now on says so: its part has ranges past the prefix.
        if let kept = request.keptRanges { segmented[record.key] = kept.count }
        record.partial.rangesTaken()
        do {
            try session.start(key: record.key, request: request)
        } catch {
            throw StoreError("curl_multi_add_handle", "\(urls.shown(item.url.string)) (\(error))", errno: EIO)
        }
        running[record.key] = record
        logger.debug("transfer started", metadata: ["item": "\(record.id)", "url": "\(urls.shown(item.url.string))",
                                                    "attempt": "\(record.attempts)", "resume-from": "\(resumeFrom)"])
    }

    /// Takes the item's transfer out of the session (pause, cancel, preemption, stop), keeping
    /// its partial; does nothing when it is not running.
    /// `part`: the part the running phase held (the item has left it by now).
    func stop(_ record: ItemRecord, part: StagingFile?) {
        guard let outcome = session.remove(record.key) else { return }
        running.removeValue(forKey: record.key)
        if record.summary.isUpload { closeUpload(record); return }
        keepPartial(record, outcome, part: part)
    }

    /// A transfer ended on its own: records what it left and reduces it to what the lifecycle
    /// decides on.
    func ended(_ outcome: TransferOutcome) -> (ItemRecord, TransferEnd)? {
        guard let record = running.removeValue(forKey: outcome.key) else { return nil }
        if record.summary.isUpload { return (record, uploadEnded(record, outcome)) }
        keepPartial(record, outcome, part: record.part)
        if let body = outcome.unwritten, let part = record.part {
            part.unwritten = body
            writer.writeSoon(part)
        }
        record.noteResponse(outcome.facts)
        if let unchanged = notModified(record, outcome) {
            return (record, TransferEnd(failure: nil, sha256: nil, retryAfter: nil, hasPartial: false, notModified: unchanged))
        }
        if outcome.failure == nil, let digest = outcome.sha256 {
            return (record, TransferEnd(failure: nil, sha256: digest, retryAfter: nil, hasPartial: true,
                                        wantedSHA256: record.loaded?.sha256))
        }
        var failure = outcome.failure ?? .curl(code: -1, text: "no result")
        if case .clientCertificate(let why) = failure, let name = record.loaded?.credentials {
            failure = .clientCertificate("credentials '\(name)': \(why)")
        }
        record.noteFailure(failure)
        var whole: String? = nil
        // A 416 says the kept part is whole only if it is about the part's version (see
        // `validatorContradicting`): else a server ignoring If-Range sized another version.
        if case .httpStatus(416) = failure, outcome.facts.rangeTotal == record.bytesOnDisk, let hash = record.hash,
           outcome.facts.validatorContradicting(record.validator) == nil {
            whole = hash.hexDigest
        }
        var end = TransferEnd(failure: failure, sha256: nil, retryAfter: outcome.facts.retryAfter,
                              hasPartial: record.bytesOnDisk > 0, wholePartialSHA256: whole,
                              wantedSHA256: record.loaded?.sha256, tooLargeHint: record.loaded.flatMap(tooLargeHint),
                              outage: outcome.isOutage, serverError: outcome.facts.serverError)
        if case .noRoom(let never, let why) = failure {
            // Cut for room before (or, of unknown length, while) writing its body: a body that
            // waits is waited for with the size its headers gave (else 1 MiB more than it holds).
            if never { end.neverFits = why }
            else { record.announcedBytes = outcome.facts.rangeTotal ?? outcome.facts.contentLength
                       ?? outcome.bytesOnDisk + BodyRoomAnswers.unsizedStep }
        }
        return (record, end)
    }

    /// Remembers the resume validators as soon as a large body starts, so that even a `kill -9`
    /// leaves a partial the next run can resume with `Range` + `If-Range`.
    /// Returns the items whose response began: their host answered.
    @discardableResult
    func bodiesBegan() -> [(record: ItemRecord, facts: ResponseFacts)] {
        var began: [(record: ItemRecord, facts: ResponseFacts)] = []
        for started in session.takeBodyStarts() {
            guard let record = running[started.key] else { continue }
            began.append((record, started.facts))
            if started.restartedFromZero {
                logger.info("server sent the whole body again; starting over", metadata: ["item": "\(record.id)"])
            }
            record.partial.bodyBegan(etag: started.facts.etag, lastModified: started.facts.lastModified,
                                     restartedFromZero: started.restartedFromZero)
            let total = started.facts.rangeTotal ?? started.facts.contentLength ?? record.expectedBytes ?? Int64.max
            guard total >= Self.resumeStateThreshold, let part = record.part else { continue }
            // A large body gets its staging name now, resumable or not: a crash must not lose it
            // unseen, and `ls staging/` shows it.
            guard nameForResume(record, part), record.validator != nil else { continue }
            // A resume's prefix (up to where the range began) was synced when it started.
            writeState(record, runningState(record, part, bytes: 0,
                                            synced: started.restartedFromZero ? 0 : started.facts.rangeStart ?? 0))
        }
        return began
    }

    /// Large bodies that reached a checkpoint (`--sync-every`): their `B.state` says how much of
    /// the part a resume may build on after a power cut. Only a body whose state was written
    /// when it began (named, with a validator) gets one.
    func checkpointsReached() {
        for (key, durable) in session.takeCheckpoints() {
            guard let record = running[key], record.hasStateFile, record.validator != nil, let part = record.part,
                  part.isNamed else { continue }
            writeState(record, runningState(record, part, bytes: durable, synced: durable))
        }
    }

    /// A `B.state` in phase running: the part's validators and how much of it is synced, in this boot.
    /// `keptSynced`: the item is not running and its part was just synced: its kept ranges (a
    /// segmented transfer that stopped) are durable as far as they reach.
    private func runningState(_ record: ItemRecord, _ part: StagingFile, bytes: Int64, synced: Int64?,
                              keptSynced: Bool = false) -> ItemState {
        var segments = segmented[record.key]
        var ranges = segments == nil ? nil : session.segmentExtents(of: record.key)?.ranges
        if segments == nil, let kept = record.keptRanges, !kept.isEmpty {
            segments = kept.count
            ranges = kept.map { r in r.count >= 3 ? [r[0], r[1], r[2], keptSynced ? r[1] : r[0]] : r }
        }
        return ItemState(request: record.request.name, index: record.index, url: urls.shown(record.loaded?.url.string ?? record.url),
                         phase: .running, inode: part.inode, etag: record.etag, lastModified: record.lastModified,
                         bytes: bytes, attempts: record.attempts, startedAt: record.startedAt.map(RFC3339.format),
                         syncedBytes: synced, bootID: BootID.current, refreshedURL: record.refreshedURL?.string,
                         segments: segments, ranges: ranges)
    }

    /// A segmented item's state with its ranges as far as they are in the file now, at most every
    /// 250 ms: what a restart in this boot builds on (`ItemState.ranges`).
    func saveSegmentState(_ record: ItemRecord, now: Date) {
        guard segmented[record.key] != nil, let part = record.part, record.hasStateFile,
              now.timeIntervalSince(segmentStateWritten[record.key] ?? .distantPast) >= 0.25,
              let extents = session.segmentExtents(of: record.key) else { return }
        segmentStateWritten[record.key] = now
        writeState(record, runningState(record, part, bytes: extents.prefix, synced: session.durablePrefix(of: record.key)))
    }

    /// `record`'s body is about to be fetched in up to `ranges` ranges. Its state says so first,
    /// before any range is written: a restart then trusts only the synced in-order prefix. False
    /// when that state cannot be written (the body then stays one stream).
    func markSegmented(_ record: ItemRecord, ranges: Int) -> Bool {
        guard let part = record.part else { return false }
        segmented[record.key] = ranges
        guard record.hasStateFile || part.isNamed else { return true }   // no state: a restart starts over
        let durable = session.durablePrefix(of: record.key)
        do {
            try store.writeState(record.base, runningState(record, part, bytes: durable, synced: durable))
            record.noteStateFile()
            return true
        } catch {
            segmented.removeValue(forKey: record.key)
            logger.warning("could not write the item's state; fetched as one stream: \(error)", metadata: ["item": "\(record.id)"])
            return false
        }
    }

    /// Writes `B.state` so that a restart resumes the partial (only when it can be resumed),
    /// after syncing the part: a transfer stopped (a failure to retry, an outage, a pause, a
    /// stop) may wait for hours, and a power cut meanwhile must not cost its bytes.
    /// `part`: the part the running phase held (the item has left it by now).
    func saveResumeState(_ record: ItemRecord, part: StagingFile?) {
        guard record.bytesOnDisk > 0 || record.keptRanges != nil, record.validator != nil, let part,
              nameForResume(record, part) else { return }
        var synced: Int64? = nil
        do { synced = min(try part.syncedLength(), record.bytesOnDisk) } catch {
            // Not fatal: a restart in this boot still resumes; after a power cut it starts over.
            logger.warning("could not sync the partial: \(error)", metadata: ["item": "\(record.id)"])
        }
        writeState(record, runningState(record, part, bytes: record.bytesOnDisk, synced: synced, keptSynced: synced != nil))
    }

    /// Gives an unnamed part its staging name, so that a restart finds it; false (logged) when
    /// that fails: the item then starts over after a restart instead of resuming.
    private func nameForResume(_ record: ItemRecord, _ part: StagingFile) -> Bool {
        do {
            try store.name(part)
            return true
        } catch {
            logger.warning("could not name the partial in staging: \(error)", metadata: ["item": "\(record.id)"])
            return false
        }
    }

    func writeState(_ record: ItemRecord, _ state: ItemState) {
        do {
            try store.writeState(record.base, state)
            record.noteStateFile()
        } catch {
            // Not fatal: without it a restart starts the item over instead of resuming it.
            logger.warning("could not write the item's resume state: \(error)", metadata: ["item": "\(record.id)"])
        }
    }

    /// A reload: new limits for what starts next, and the new `--max-rate` at once.
    func update(_ configuration: DaemonConfiguration) {
        self.configuration = configuration
        applyRateSchedule(now: Date())
        do { try session.setConnectionLimits(perHost: max(configuration.perHost, configuration.perHostMax), streams: configuration.maxStreams,
                                             total: configuration.concurrency) } catch {
            logger.error("SIGHUP: libcurl refused the new connection limits; the old ones stay", metadata: ["error": "\(error)"])
        }
    }

    /// Sets the session's rate to what `--max-rate`'s schedule says for `now`, and notes when
    /// it says something else next (`rateChangesAt`, one of the deadlines the engine sleeps
    /// until: no wake-up between two changes).
    func applyRateSchedule(now: Date) {
        let schedule = configuration.maxRate
        let rate = schedule.rate(at: now, in: .current)
        rateChangesAt = schedule.nextChange(after: now, in: .current)
        if !schedule.windows.isEmpty, rate != rateInForce || !scheduleApplied {
            logger.notice(scheduleApplied ? "max-rate changed by its schedule" : "max-rate from its schedule", metadata: [
                "rate": "\(rate)", "until": "\(rateChangesAt.map { RFC3339.format($0) } ?? "-")"])
        }
        scheduleApplied = true
        rateInForce = rate
        session.setMaxRate(rate)
    }

    /// Bytes on disk and the expected total of a running transfer.
    func progress(of record: ItemRecord) -> (bytes: Int64, total: Int64?)? {
        session.progress(of: record.key)
    }

    /// The size limit of an item: its `max-bytes`, else `expected-bytes` × slack; never above
    /// the daemon-wide `--max-bytes`.
    func sizeLimit(_ item: RequestItem) -> Int64? {
        var limit: Int64? = item.maxBytes
        if limit == nil, let expected = item.expectedBytes {
            let scaled = Double(expected) * configuration.expectSlack
            limit = scaled >= Double(Int64.max) ? nil : max(Int64(scaled), expected)
        }
        if configuration.maxBytes > 0 { limit = min(limit ?? configuration.maxBytes, configuration.maxBytes) }
        return limit
    }

    /// What a `too-large` failure adds to its message when the limit came from `expected-bytes`.
    func tooLargeHint(_ item: RequestItem) -> String? {
        guard item.maxBytes == nil, item.expectedBytes != nil else { return nil }
        return " (expected-bytes × \(configuration.expectSlack); set max-bytes to allow more)"
    }

    private func keepPartial(_ record: ItemRecord, _ outcome: TransferOutcome, part: StagingFile?) {
        segmented.removeValue(forKey: record.key)
        segmentStateWritten.removeValue(forKey: record.key)
        if outcome.overshootBytes > 0 {
            logger.debug("segments: bytes received past their ranges' ends", metadata: [
                "item": "\(record.id)", "bytes": "\(outcome.overshootBytes)"])
        }
        if let kept = outcome.keptRanges, !kept.isEmpty, part != nil {
            // A segmented transfer stopped: its ranges stay in the part, the next start fetches
            // only what is missing of them (`saveResumeState` syncs them and records them).
            let ofThePart = outcome.facts.httpStatus == 200 || outcome.facts.httpStatus == 206
            record.partial.kept(bytes: outcome.bytesOnDisk, hash: outcome.hashState,
                                validators: ofThePart ? (outcome.facts.etag, outcome.facts.lastModified) : nil)
            record.partial.keptRanges(kept)
            return
        }
        if outcome.partHasMore, let part {
            // Ranges past the in-order prefix go: nothing may build on them. Should this fail,
            // the next start cuts the part back to the prefix anyway.
            try? part.truncate(to: outcome.bytesOnDisk)
        }
        // Only a response whose body went into the part names the part's version: an error
        // page's or a 416's validators must not become the next resume's If-Range (nor the
        // validator a 416 is checked against).
        let ofThePart = outcome.facts.httpStatus == 200 || outcome.facts.httpStatus == 206
        record.partial.kept(bytes: outcome.bytesOnDisk, hash: outcome.hashState,
                            validators: ofThePart ? (outcome.facts.etag, outcome.facts.lastModified) : nil)
    }
}

/// A body the transfer left unwritten is written by whoever next uses its part (the publisher).
extension ReceivedBody: UnwrittenPartBytes {}
