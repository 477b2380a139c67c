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
///
/// What is not the running transfers' bookkeeping is in small types the driver holds and asks:
/// `ResumeStates` (the `B.state` files), `TransferRequests` (the one request builder, with
/// `ConditionalFetch`), `StartChecks`, `MirrorMoves`, `URLRefresh` and `UploadTransfers`. The
/// engine still asks the driver; the driver says which of them does the work.
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
    /// Which transfers run, and what their ends and body starts decide (the part's steps, the
    /// machine's `TransferEnd`, resume states, the host's answer): the core's `TransferBook`,
    /// reaching the daemon through `TransferShell`.
    private(set) lazy var book = TransferBook(ports: TransferShell(driver: self))
    /// Items whose transfer is in the session, by key (the book's).
    var running: [Int: ItemRecord] { book.running }
    /// The daemon-wide rate in force (bytes per second, 0: none) and when the schedule changes it.
    private(set) var rateInForce: Int64 = 0
    private(set) var rateChangesAt: Date?
    private var scheduleApplied = false
    /// The `B.state` writer, and what the driver asks for mirrors, refreshed URLs and uploads.
    let states: ResumeStates
    private let mirrors: MirrorMoves
    private let refresh: URLRefresh
    private let uploads: UploadTransfers
    /// Writes the small bodies transfers leave unwritten, off the engine's thread.
    private let writer = PartWriter()

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
        states = ResumeStates(session: session, store: store, urls: urls, logger: logger)
        mirrors = MirrorMoves(states: states, urls: urls, logger: logger)
        refresh = URLRefresh(states: states, urls: urls, logger: logger)
        uploads = UploadTransfers(session: session, store: store, states: states, urls: urls, logger: logger)
        requests = TransferRequests(configuration: configuration, store: store)
        startChecks = StartChecks(configuration: configuration, logger: logger)
        applyRateSchedule(now: Date())
    }

    /// The request builder for the configuration in force, and what an attempt's start checks:
    /// made once, and again at a reload (`update`), not at every start (each took a copy of the
    /// configuration).
    private(set) var requests: TransferRequests
    /// What an attempt's start depends on, read at the item's turn (`ItemShell.checkStart`).
    private(set) var startChecks: StartChecks

    /// The item moves on to its next source (`MirrorMoves`).
    func moveToNextSource(_ record: ItemRecord, part: StagingFile?, requestFile: RequestFileSlot) {
        mirrors.moveToNextSource(record, part: part, requestFile: requestFile)
    }

    /// The refresh hook has ended: the item's event, if it still waits for it (`URLRefresh`).
    func refreshEnded(_ record: ItemRecord, attempt: Int, outcome: HookRunner.Outcome, line: String?) -> ItemEvent? {
        refresh.ended(record, attempt: attempt, outcome: outcome, line: line)
    }

    /// Starts an upload item's transfer (`UploadTransfers.start`); returns the attempt that
    /// holds its open file, for the running phase.
    func startUpload(_ record: ItemRecord, _ item: RequestItem, _ upload: Upload,
                     credentials: [RequestHeader]) throws(UploadStartError) -> RunningAttempt {
        let requests = self.requests
        let attempt = try uploads.start(record, item, upload) { requests.request(record, item, credentials: credentials, body: .upload($0)) }
        book.started(record.key, record)
        return attempt
    }

    /// A failed upload item's file goes into `failed/` (`UploadTransfers.fileFailed`).
    func fileFailedUpload(_ record: ItemRecord, code: String, io: IOQueue) { uploads.fileFailed(record, code: code, io: io) }

    /// `B.state` for a stopped transfer (`ResumeStates.saveResumeState`).
    func saveResumeState(_ record: ItemRecord, part: StagingFile?) { states.saveResumeState(record, part: part) }

    func writeState(_ record: ItemRecord, _ state: ItemState) { states.write(record, state) }

    /// Opens (or reuses) the item's part and adds its transfer to the session. A resumed part
    /// whose hash was lost in a restart is re-hashed first. `item` is the record's full
    /// description (`ItemRecord.load()`).
    /// `credentials`: header lines from `--credentials-dir`, read for this start only; they take
    /// the place of the request's own headers of the same name.
    /// `opened`: the attempt over a part it opened, for the item's machine (the running phase
    /// holds it); set before anything that may throw after it, so the caller hands it over
    /// either way. Left nil when the running phase already held one.
    /// `hashedMirror`: a `--hashed-mirror` URL to ask instead of the item's own, with none of the
    /// item's headers or credentials (they are for its own server).
    func start(_ record: ItemRecord, _ item: RequestItem, credentials: [RequestHeader] = [], hashedMirror: String? = nil,
               opened: inout RunningAttempt?) throws(StoreError) {
        let firstStart = record.startedAt == nil
        record.noteStarted(at: Date())
        // The part opened here is used at once; the machine takes it with `partOpened`, which the
        // caller sends (handled after the effect that started this transfer: events never nest).
        let part: StagingFile
        let attempt: RunningAttempt
        if let held = record.attempt, let file = held.file {
            part = file
            attempt = held
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
                let unnamed = firstStart && !record.hasStateFile && (record.expectedBytes ?? 0) < TransferBook<TransferShell>.resumeStateThreshold
                part = try store.openPart(record.base, fresh: true, unnamed: unnamed)
                record.partEmptied()
            }
            attempt = RunningAttempt(file: part)
            opened = attempt
        }
        // Bytes an earlier attempt left unwritten (its publish failed, or its body was refused)
        // go into the file before it is resumed or cut back.
        try part.writeUnwritten()
        var resumeFrom: Int64 = 0
        if record.bytesOnDisk > 0, record.validator != nil {
            if record.hash == nil {
                do { record.partRehashed(try HashState.ofPrefix(fd: part.fd, length: record.bytesOnDisk)) } catch {
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
            record.partEmptied()
        }
        let request = requests.request(record, item, credentials: credentials,
                                       body: .download(part, attempt, resumeFrom: resumeFrom, hashedMirror: hashedMirror))
        if let kept = request.keptRanges { states.fetchesKeptRanges(record.key, ranges: kept.count) }
        // Kept ranges serve the next start only, whether or not this one fetches them.
        if record.keptRanges != nil { record.partRangesTaken() }
        do {
            try session.start(key: record.key, request: request)
        } catch {
            throw StoreError("curl_multi_add_handle", "\(urls.shown(item.url.string)) (\(error))", errno: EIO)
        }
        book.started(record.key, record)
        logger.debug("transfer started", metadata: ["item": "\(record.id)", "url": "\(urls.shown(item.url.string))",
                                                    "attempt": "\(record.attempts)", "resume-from": "\(resumeFrom)"])
    }

    /// Takes the item's transfer out of the session (pause, cancel, preemption, stop), keeping
    /// its partial (`TransferBook.stopped`); does nothing when it is not running.
    /// `attempt`: what the running phase held (the item has left it by now).
    func stop(_ record: ItemRecord, attempt: RunningAttempt?) {
        guard let outcome = session.remove(record.key) else { return }
        if record.summary.isUpload {
            book.forget(record.key)
            attempt?.closeUpload()
            return
        }
        book.ports.stoppedPart = attempt?.file
        book.stopped(record, TransferReport(outcome, failure: outcome.failure, partOpen: attempt?.file != nil))
        book.ports.stoppedPart = nil
    }

    /// A transfer ended on its own: what the record notes of it, then what the book decides
    /// (the part's step, the end the machine is told, the host's answer), as the event its
    /// machine is told. nil when it is not running, or it started again from its next hashed
    /// mirror.
    func ended(_ outcome: TransferOutcome) -> (ItemRecord, ItemEvent)? {
        guard let record = running[outcome.key] else { return nil }
        if record.summary.isUpload {
            book.forget(outcome.key)
            return (record, .transferEnded(uploads.ended(record, outcome)))
        }
        if let body = outcome.unwritten, let part = record.part {
            part.unwritten = body
            writer.writeSoon(part)
        }
        record.noteResponse(outcome.facts)
        var failure = outcome.failure
        if failure == nil && outcome.sha256 == nil { failure = .curl(code: -1, text: "no result") }
        if case .clientCertificate(let why)? = failure, let name = record.loaded?.credentials {
            failure = .clientCertificate("credentials '\(name)': \(why)")
        }
        let decided = book.ended(TransferReport(outcome, failure: failure, partOpen: record.part != nil))
        // A 304 ends the item with the existing file, whose facts its published phase keeps.
        if let end = decided?.end, end.notModified != nil {
            return (record, .transferEnded(end, receipt: ConditionalFetch.receipt(record)))
        }
        // A failure the machine is told (not a 304 that ends the item) is what its error file reports.
        if let failure { record.noteFailure(failure) }
        guard let decided else { return nil }
        return (decided.record, .transferEnded(decided.end))
    }

    /// Responses began (the session's `takeBodyStarts`; the loop asks only when it gave some):
    /// `TransferBook.bodiesBegan`. `endingWhole`: transfers that ended whole in this turn.
    func bodiesBegan(_ starts: [(key: Int, facts: ResponseFacts, restartedFromZero: Bool)], endingWhole: Set<Int>) {
        book.bodiesBegan(starts.map { BodyStart(key: $0.key, etag: $0.facts.etag, lastModified: $0.facts.lastModified,
                                                 total: $0.facts.rangeTotal ?? $0.facts.contentLength, rangeStart: $0.facts.rangeStart,
                                                 restartedFromZero: $0.restartedFromZero, facts: $0.facts) },
                         endingWhole: endingWhole)
    }

    /// Large bodies that reached a checkpoint (`--sync-every`; the session's `takeCheckpoints`).
    func checkpointsReached(_ checkpoints: [(key: Int, durableBytes: Int64)]) { book.checkpointsReached(checkpoints) }

    /// A reload: new limits for what starts next, and the new `--max-rate` at once.
    func update(_ configuration: DaemonConfiguration) {
        self.configuration = configuration
        requests = TransferRequests(configuration: configuration, store: store)
        startChecks = StartChecks(configuration: configuration, logger: logger)
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
}

/// A body the transfer left unwritten is written by whoever next uses its part (the publisher).
extension ReceivedBody: UnwrittenPartBytes {}
