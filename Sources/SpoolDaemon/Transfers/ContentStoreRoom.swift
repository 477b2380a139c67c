import Foundation
import Logging
import SpoolConfiguration
import SpoolCore
import SpoolMetrics
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// The content store's room (`--store`): the daemon's side of the store — the store and its
/// claims folder, the hits' reads on the copy thread (`ContentStoreRoom+Hits.swift`), the
/// `--hashed-mirror` walk, the counters, and a published body's ingest on the I/O queue
/// (`StoreIngest`). The shell's rules — an item's flight by digest, who waits for whom and in
/// what order, the slot queue, when to check, what ends a flight, what a stale claim's loss does
/// — are `StoreExecutor`'s (SpoolCore), driven here through `StoreShell`'s ports, as the
/// simulator drives the same code through its own.
final class ContentStoreRoom {
    let store: ContentStore
    let claims: StoreClaims
    /// `store-link = hardlink`: a hit publishes the entry itself (one inode, read-only).
    let hardlink: Bool
    private(set) var maxBytes: Int64
    let leasePeriod: Double
    let leaseTimeout: Double
    let logger: Logger

    /// Digests being published from the store now: never evicted meanwhile.
    var inUse: [String: Int] = [:]

    /// Items whose hit is being read on `copyQueue` (`ContentStoreRoom+Hits.swift`): the part filled and
    /// hashed, or the entry itself hashed (hardlink: `handedOver` false until it matched).
    struct Copying {
        let digest: String
        let part: StagingFile
        /// The item's running phase holds `part` already (a fresh part a copy fills).
        let handedOver: Bool
        let credentials: [RequestHeader]
    }
    var copying: [Int: Copying] = [:]
    /// Digests whose entry a hit found rotten and could not remove (the store read-only to this
    /// process): taken as absent from then on, so that their items fetch instead of reading the
    /// same rotten bytes again and again.
    var distrusted: Set<String> = []
    /// Hits are read here (copied and hashed), one at a time, off the engine's thread (which goes
    /// on with transfers) and off the I/O queue (which goes on publishing); each answers through the inbox.
    let copyQueue = DispatchQueue(label: "spoolfetch-store-copy")
    let post: @Sendable (EngineMessage) -> Void

    /// `--hashed-mirror` sources and the items fetching from one now (`HashedMirrorSources`).
    private var mirrors: HashedMirrorSources

    static let checkInterval: TimeInterval = 0.2

    /// The shell's rules (`StoreExecutor`), given their ports once the engine is built (`attach`).
    private(set) var executor: StoreExecutor<StoreShell>!

    /// Counters for the metrics and `spoolfetch store` (saved in `store/counters/WORKER` at most
    /// once a second while they change, and at exit).
    var counters: StoreCounters

    /// The store's entries and bytes for the metrics: counted at start and after each eviction,
    /// added to by this worker's ingests (other workers' show at the next count).
    var totals = StoreTotals(entries: 0, bytes: 0)
    let metrics: DaemonMetrics

    init(store: ContentStore, worker: String, hardlink: Bool, maxBytes: Int64, leasePeriod: Double,
         leaseTimeout: Double, hashedMirrors: [String] = [], metrics: DaemonMetrics,
         post: @escaping @Sendable (EngineMessage) -> Void, logger: Logger) {
        self.metrics = metrics
        self.post = post
        self.store = store
        mirrors = HashedMirrorSources(templates: hashedMirrors)
        claims = StoreClaims(folder: store.claimsFolder, worker: worker)
        counters = StoreCounters(worker: worker)
        self.hardlink = hardlink
        self.maxBytes = maxBytes
        self.leasePeriod = leasePeriod
        self.leaseTimeout = leaseTimeout
        self.logger = logger
    }

    /// The executor gets its ports: the engine's item table, scheduler and fetch start (called
    /// once, at the end of `Engine.init`, when the engine can be handed out).
    func attach(engine: Engine) {
        executor = StoreExecutor(ports: StoreShell(engine: engine, room: self),
                                 timing: .init(leasePeriod: leasePeriod, leaseTimeout: leaseTimeout, checkInterval: Self.checkInterval))
    }

    /// The room for `configuration`'s store, its folders made; nil when the store is off.
    static func open(_ configuration: DaemonConfiguration, spool: SpoolLayout, worker: String, metrics: DaemonMetrics,
                     post: @escaping @Sendable (EngineMessage) -> Void, logger: Logger) throws(DaemonError) -> ContentStoreRoom? {
        guard let path = configuration.storePath else { return nil }
        var st = stat()
        let mode = stat(spool.root, &st) == 0 ? st.st_mode & 0o7777 : 0o755
        let store: ContentStore
        do { store = try ContentStore(path: path, mode: mode) } catch { throw .spool(error) }
        // Leftovers of crashed ingests, and claims of processes certainly gone; a temp file only
        // once untouched for an hour (a worker on another machine may be writing it).
        store.removeLeftovers(all: false)
        StoreClaims(folder: store.claimsFolder, worker: worker).removeLeftovers()
        logger.info("content store", metadata: ["path": "\(path)", "link": "\(configuration.storeLink)",
                                                "max": "\(configuration.storeMax)"])
        metrics.storeEnabled()
        // A hardlink cannot cross filesystems: with the store elsewhere than the final folder, hits are copies.
        var hardlink = configuration.storeLink == "hardlink"
        if hardlink, store.deviceID == nil || store.deviceID != spool.final.deviceID() {
            logger.warning("store-link = hardlink, but the store and the final folder are on different filesystems: hits are copies",
                           metadata: ["store": "\(path)", "final": "\(spool.final.path)"])
            hardlink = false
        }
        let room = ContentStoreRoom(store: store, worker: worker, hardlink: hardlink,
                                    maxBytes: configuration.storeMax, leasePeriod: configuration.leasePeriod,
                                    leaseTimeout: configuration.leaseTimeout, hashedMirrors: configuration.hashedMirrors,
                                    metrics: metrics, post: post, logger: logger)
        // This machine's workers that are gone leave their counts to this one (one file each
        // run would pile up in counters/ otherwise).
        if let dash = worker.lastIndex(of: "-") {
            room.counters.takeOver(store.takeOverCounters(of: String(worker[..<dash]), into: worker))
        }
        // Counted once at start (a listing of the store); then kept up by this worker's ingests
        // and evictions.
        let (entries, bytes) = store.totals()
        room.totals = StoreTotals(entries: entries, bytes: bytes)
        return room
    }

    // MARK: At an item's start

    /// The digest an item would be stored under: a download's known `sha256:`.
    static func digest(of item: RequestItem) -> String? {
        guard item.upload == nil, let wanted = item.sha256, ContentStore.isDigest(wanted) else { return nil }
        return wanted
    }

    /// The item left its running phase (stopped, paused, cancelled): it waits no more, and a
    /// hit being read for it is let go.
    func forget(_ key: Int) {
        executor.forget(key)
        mirrors.forget(key)
        if let copy = copying.removeValue(forKey: key) { release(copy.digest) }
    }

    /// Items running with no transfer: waiting for another's fetch, or being copied from the store
    /// (a stop must reach them too).
    var waitingKeys: [Int] { executor.waitingKeys + copying.keys.sorted() }

    func itemEnded(_ key: Int) { executor.itemEnded(key); mirrors.forget(key) }

    // MARK: Hashed mirrors

    /// The URL an item's fetch asks first: its first hashed mirror, or nil (its own URL).
    func firstSource(_ record: ItemRecord, _ item: RequestItem, credentials: [RequestHeader]) -> String? {
        mirrors.first(record, item, credentials: credentials)
    }

    /// The source to start now when a hashed mirror's transfer did not bring the body (`next` nil:
    /// the item's own URL); nil when the item's machine takes the transfer's end.
    func fallThrough(_ record: ItemRecord, _ end: TransferEnd) -> (next: String?, credentials: [RequestHeader])? {
        mirrors.fallThrough(record, end, logger: logger)
    }

    /// At exit: the claims of fetches that did not end go (another worker fetches at once instead of
    /// waiting out a lease), and the counters are written.
    func close() {
        executor.close()
        saveCounters()
    }

    /// Writes this worker's counters if they changed (also at exit).
    func saveCounters() { counters.saveIfChanged(to: store, logger: logger) }

    func update(hashedMirrors: [String]) { mirrors.update(templates: hashedMirrors) }

    // MARK: Into the store

    /// A batch was published: each body verified against its request's `sha256:` and not taken
    /// from the store goes in, on the I/O queue; its flight waits for that.
    func published(_ results: [PublishResult], item: (String) -> ItemRecord?, io: IOQueue) {
        for result in results where result.isPublished {
            guard let record = item(result.base), let wanted = record.loaded.flatMap(Self.digest(of:)),
                  result.job.marker.sha256 == wanted,
                  let endsFlight = executor.published(record.key, digest: wanted) else { continue }
            let flight = endsFlight ? record.key : nil
            let ingest = StoreIngest(store: store, part: result.job.part, bytes: result.job.marker.bytes, digest: wanted,
                                     flight: flight, maxBytes: maxBytes, inUse: Set(inUse.keys).union([wanted]))
            io.submit { ingest.run() }
        }
    }

    /// The I/O queue's answer to an ingest: the flight it ends (`flight`, the fetching item's key)
    /// ends and its claim goes; the digest's waiters are checked now either way.
    func ingested(digest: String, flight: Int?, outcome: ContentStore.IngestOutcome?, evicted: Int, totals counted: StoreTotals?,
                  error: StoreError?) {
        totals = StoreIngest.totals(totals, after: outcome, of: digest, counted: counted, in: store)
        StoreIngest.log(digest: digest, outcome: outcome, evicted: evicted, error: error, logger: logger)
        executor.ingested(digest: digest, flight: flight)
    }

    func update(maxBytes: Int64) { self.maxBytes = maxBytes }
}
