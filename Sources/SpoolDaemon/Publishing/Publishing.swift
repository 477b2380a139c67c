import Foundation
import SpoolCore
import Logging
import SpoolMetrics
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// The publishing room: verified items on their way into the final folder. It builds each
/// item's job (its marker, its journal entry), queues the jobs, hands them to the publisher in
/// batches (one batch at a time, on the I/O queue), keeps failed jobs for their retry, and turns
/// each result into the event its item's lifecycle takes. Upload items take the same road with
/// their records (`NAME.uploaded`, `NAME.response`) instead of a file.
///
/// Batching is what keeps the durability promise affordable: one journal and one sync per
/// batch instead of several serial fsyncs per file (see `Publisher`).
///
/// The job of an item lives in its phase (`ItemLifecycle.State.publishing`); this room's queue
/// and retries are copies of it on their way to the publisher, dropped with `drop` when the item
/// ends otherwise.
final class Publishing {
    /// Runs a batch's steps (`Publisher.publish`, on the I/O queue). Given only by a test that
    /// needs a batch to meet what a real disk seldom shows at will (a full disk).
    private let publisher: @Sendable ([PublishJob]) -> [PublishResult]
    private let store: SpoolStore
    private let io: any IOSubmitting
    private let logger: Logger
    private let urls: URLPrivacy
    private let metrics: DaemonMetrics
    /// Says whether a body can ever fit into the final folder (a publish that hit a full disk).
    private let space: SpaceGate
    /// Ties each batch's journal to the requests it records (see `JournalLedger`).
    private let ledger: JournalLedger
    /// The jobs waiting for a batch or a retry, and whether a batch is on the I/O queue (the
    /// core's rules, which the simulator runs too).
    private var jobs = PublishQueue<PublishJob>()
    /// Upload records waiting to be written (see `UploadRecordQueue`).
    private var uploadRecords = UploadRecordQueue()

    init(store: SpoolStore, io: any IOSubmitting, logger: Logger, urls: URLPrivacy, metrics: DaemonMetrics, space: SpaceGate,
         ledger: JournalLedger, publisher: (@Sendable ([PublishJob]) -> [PublishResult])? = nil) {
        self.ledger = ledger
        let real = Publisher(store: store)
        self.publisher = publisher ?? { real.publish($0) }
        self.space = space
        self.store = store
        self.io = io
        self.logger = logger
        self.urls = urls
        self.metrics = metrics
    }

    /// Nothing queued, in flight or waiting to be tried again.
    var isIdle: Bool { jobs.isIdle }
    /// A batch is on the I/O queue.
    var inFlight: Bool { jobs.inFlight }
    var nextRetry: Date? { jobs.nextRetry }
    /// When `kick` next has something to do: now when jobs wait and no batch is in flight, else
    /// when the next retry is due; nil: nothing.
    var handOverAt: Date? { jobs.handOverAt }

    // MARK: Into the queue

    /// The body of `record` is complete and verified (`digest`), in `part`: its job, with the
    /// marker's facts, goes to the queue, and back to the caller for the item's phase.
    /// `fromStore`: the body came from the content store (no request): the marker says so.
    func publish(_ record: ItemRecord, digest: String, part: StagingFile, fromStore: Bool = false) -> PublishJob? {
        guard let item = record.loaded else { return nil }
        let finished = Date()
        let facts = record.lastFacts ?? ResponseFacts()
        // The source that served it: a mirror's URL, else the request's (not a refreshed one,
        // which the consumer never saw).
        let source = record.sourceIndex
        let served = source > 0 ? record.currentURL ?? item.url : item.url
        let shown = urls.shown(served.string)
        // Without a redirect the final URL is the one asked for: shown once.
        let finalShown = facts.finalURL == served.string ? shown : urls.shown(facts.finalURL)
        var marker = ItemMarker(
            request: record.request.name, group: record.request.group, index: record.index,
            url: shown, finalURL: finalShown, name: item.name,
            bytes: record.bytesOnDisk, sha256: digest, httpStatus: facts.httpStatus,
            etag: facts.etag ?? record.etag, lastModified: facts.lastModified ?? record.lastModified,
            contentType: facts.contentType, startedAt: RFC3339.format(record.startedAt ?? finished),
            finishedAt: RFC3339.format(finished), attempts: record.attempts,
            outageSeconds: record.outageSeconds(at: finished), urlQuerySha256: URLPrivacy.querySHA256(served.string),
            source: fromStore ? .store : item.mirrors.isEmpty ? nil : .index(source))
        marker.connections = facts.connections > 1 ? facts.connections : nil
        marker.owner = record.request.ownerName
        marker.ownerUID = Int(record.request.owner)
        let state = ItemState(request: record.request.name, index: record.index, url: marker.url,
                              phase: .ready, inode: part.inode, etag: marker.etag, lastModified: marker.lastModified,
                              bytes: record.bytesOnDisk, attempts: record.attempts, startedAt: marker.startedAt,
                              marker: marker)
        let job = PublishJob(part: part, state: state, marker: marker, writesMarker: record.writesItemMarker,
                             replacesExisting: record.replacesExisting)
        jobs.add(job)
        return job
    }

    /// A job a recovery made (an adopted item whose data was staged and verified, or published
    /// without its marker).
    func enqueue(_ job: PublishJob) { jobs.add(job) }

    /// Tries a failed job again at `at`; only its marker when the data already went through.
    func retry(_ job: PublishJob, at: Date) { jobs.retry(job, at: at) }

    /// Forgets the job of an item that ended otherwise (cancelled while its retry waited).
    func drop(base: String) { jobs.drop { $0.part.base == base } }

    /// Takes a cancelled item's job out if no batch has it yet; false when a batch has it (its
    /// result then says how the item ends).
    func withdraw(base: String) -> Bool { jobs.withdraw { $0.part.base == base } }

    /// Moves due retries to the queue and hands the queue to the publisher unless a batch is
    /// already in flight (the next batch then collects everything that finished meanwhile).
    func kick(now: Date) {
        guard let batch = jobs.takeBatch(now: now) else { return }
        let publisher = self.publisher
        io.submit { .published(publisher(batch)) }
    }

    // MARK: Results

    /// A batch's results came back: for each item still publishing (`item(base)`), the event its
    /// lifecycle takes, by the core's rule (`PublishEnding`, with this room as its ports). A
    /// failed job is handed back to the item's phase with what the batch got done
    /// (`alreadyPublishedAs`).
    func batchEnded(_ results: [PublishResult], item: (String) -> ItemRecord?) -> [(ItemRecord, ItemEvent)] {
        jobs.batchEnded()
        // Each result's item looked up once, for the ledger and for its event.
        var records: [ItemRecord?] = []
        records.reserveCapacity(results.count)
        for result in results { records.append(item(result.base)) }
        ledger.attach(results, items: records)
        var events: [(ItemRecord, ItemEvent)] = []
        events.reserveCapacity(results.count)
        for (result, record) in zip(results, records) {
            guard let record else { continue }
            // Measured here, not through a port: a published item's walk takes one call fewer.
            if result.isPublished, let file = result.finalName {
                if let complete = RFC3339.parse(result.job.marker.finishedAt) {
                    metrics.published(latency: Date().timeIntervalSince(complete))
                }
                // From the item's start to its marker being durable, in microseconds: what a
                // publish costs, measured by `Benchmarks/store-hits` (the marker's own times hold
                // milliseconds).
                if let committed = result.committedAt, let started = record.startedAt {
                    logger.debug("committed", metadata: [
                        "item": "\(record.id)", "file": "\(file)",
                        "since-start-us": "\(Int((committed.timeIntervalSince(started) * 1_000_000).rounded()))"])
                }
            }
            events.append((record, PublishEnding.event(result.outcome, job: result.job, of: record, ports: self)))
        }
        return events
    }

    // MARK: Uploads

    /// The server accepted the whole file: its record (`final/NAME.uploaded`, and
    /// `NAME.response`) is written and the file moved into `done/`, on the I/O queue.
    func recordUpload(_ record: ItemRecord, digest: String) {
        guard let item = record.loaded, let upload = item.upload else { return }
        let facts = record.lastFacts ?? ResponseFacts()
        let finished = Date()
        let url = (record.currentURL ?? item.url).string
        var entry = UploadRecord(
            request: record.request.name, group: record.request.group, index: record.index,
            requestInode: record.request.inode, name: upload.name, url: urls.shown(item.url.string),
            method: upload.method.rawValue, contentType: upload.contentType, bytes: record.bytesOnDisk, sha256: digest,
            httpStatus: facts.httpStatus, etag: facts.etag, location: facts.location.map { urls.shown($0) },
            startedAt: RFC3339.format(record.startedAt ?? finished), finishedAt: RFC3339.format(finished),
            attempts: record.attempts, outageSeconds: record.outageSeconds(at: finished))
        entry.owner = record.request.ownerName
        entry.ownerUID = Int(record.request.owner)
        logger.debug("upload accepted", metadata: ["item": "\(record.id)", "url": "\(urls.shown(url))",
                                                   "status": "\(facts.httpStatus)", "bytes": "\(record.bytesOnDisk)"])
        metrics.sent(bytes: record.bytesOnDisk)
        uploadRecords.pending.append((record.key, entry, record.upload.response))
        writeUploadRecords()
    }

    /// Hands the waiting records to the I/O queue as one batch, unless a batch is under way.
    private func writeUploadRecords() {
        guard !uploadRecords.inFlight, !uploadRecords.pending.isEmpty else { return }
        let batch = uploadRecords.pending
        uploadRecords.pending = []
        uploadRecords.inFlight = true
        let store = self.store
        io.submit {
            let results = store.recordUploads(batch.map { ($0.record, $0.response) })
            return .uploadsRecorded(zip(batch, results).map { item, result in
                switch result {
                case .success(let marker): UploadRecorded(key: item.key, file: item.record.name, marker: marker, error: nil)
                case .failure(let error): UploadRecorded(key: item.key, file: item.record.name, marker: nil, error: error)
                }
            })
        }
    }

    /// The I/O queue wrote a batch of records: for each upload still publishing (`item(key)`),
    /// the event its lifecycle takes. An upload whose record could not be written fails: the
    /// server has the file, but without a durable record a restart would send it again.
    func uploadsRecorded(_ results: [UploadRecorded], item: (Int) -> ItemRecord?) -> [(ItemRecord, ItemEvent)] {
        uploadRecords.inFlight = false
        var events: [(ItemRecord, ItemEvent)] = []
        for result in results {
            guard let record = item(result.key), record.phase == .publishing else { continue }
            var state = record.upload
            state.response = nil
            record.noteUpload(state)
            if let marker = result.marker {
                events.append((record, .publishSucceeded(file: result.file, marker: marker)))
            } else {
                events.append((record, .publishFailed(PublishFault(partGone: true, permanent: true,
                                                      message: "the server accepted the upload, but its record could not be written: \(result.error.map { "\($0)" } ?? "")"),
                                                      job: nil)))
            }
        }
        writeUploadRecords()
        return events
    }
}

/// The publishing room as the ports of the core's `PublishEnding`: the item's part on the disk,
/// the space gate's word on the final folder, the logs.
extension Publishing: PublishEndingPorts {
    func partIsNamed(_ job: PublishJob) -> Bool { job.part.isNamed }
    func partExists(_ record: ItemRecord, _ job: PublishJob) -> Bool { store.partExists(record.base) }
    func namePart(_ record: ItemRecord, _ job: PublishJob) throws { try store.name(job.part) }

    func handedBack(_ job: PublishJob, alreadyPublishedAs file: String?) -> PublishJob {
        var job = job
        job.alreadyPublishedAs = file
        return job
    }

    func neverFits(_ job: PublishJob) -> String? { space.neverPublished(bytes: job.marker.bytes, in: store.layout.final) }

    /// The marker's facts under the name the file got: what the group marker lists of it.
    func receipt(_ record: ItemRecord, _ job: PublishJob, file: String) -> PublishedReceipt? {
        var facts = job.marker
        facts.name = file
        return PublishedReceipt(facts)
    }

    func namingFailed(_ record: ItemRecord, _ error: any Error) {
        logger.warning("could not name the partial in staging: \(error)", metadata: ["item": "\(record.id)"])
    }

    func publishFailed(_ record: ItemRecord, message: String) {
        logger.warning("publishing failed: \(message)", metadata: ["item": "\(record.id)", "final": "\(store.layout.final.path)"])
    }
}

extension PublishResult {
    /// The result's facts as the core's `PublishEnding` reads them.
    var outcome: PublishOutcome {
        if isPublished, let file = finalName { return .published(file: file, marker: markerPath) }
        return .failed(finalName: finalName, permanent: error?.isPermanent ?? false, diskFull: error?.isDiskFull ?? false,
                       message: error.map { "\($0)" } ?? "unknown error")
    }
}
