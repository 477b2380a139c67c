import Foundation
import Logging
import SpoolConfiguration
import SpoolCore
import SpoolMetrics
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// The content store's room (`--store`): at an item's start, whether it is published from the
/// store, waits for another item's fetch of its digest, or fetches (`StoreDecision`); the fetches
/// of this worker by digest and their spool-wide claims; the items waiting for them; and, once a
/// body verified against its `sha256:` is published, its ingest into the store on the I/O queue.
///
/// A waiting item stays in its running phase with no transfer and no part, and gives its
/// connection slot back (`Scheduler.park`): other items start meanwhile; one that has to fetch
/// after all queues for a slot again (`awaitSlot`) before it decides anew. It is checked again when a fetch of this worker ends and otherwise every
/// `checkInterval` while any item waits (every `lease-period` while only fetches run): whether the entry arrived (hit), the fetch
/// was given up (this item fetches next: the first waiter only), or the claim went stale.
///
/// The room decides; its parts keep their own state: `StoreFlights` (this worker's fetches and
/// their claims), `StoreWaiters` (who waits, in what order), `HashedMirrorSources`,
/// `StoreCounters`, `StoreIngest` (a body's way into the store) and the hits' reads
/// (`ContentStoreRoom+Hits.swift`).
final class ContentStoreRoom {
    let store: ContentStore
    let claims: StoreClaims
    /// `store-link = hardlink`: a hit publishes the entry itself (one inode, read-only).
    let hardlink: Bool
    private(set) var maxBytes: Int64
    private let leasePeriod: Double
    private let leaseTimeout: Double
    let logger: Logger

    /// This worker's fetches by digest and their claims (`StoreFlights`).
    private(set) var flights: StoreFlights

    /// The items waiting for another's fetch, in the order they began to wait (`StoreWaiters`).
    private(set) var waiters = StoreWaiters()
    /// Items published from the store and not ended yet: their marker says `source: "store"`.
    var fromStore: Set<Int> = []
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

    private(set) var nextCheck: Date?
    static let checkInterval: TimeInterval = 0.2

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
        flights = StoreFlights(claims: claims)
        counters = StoreCounters(worker: worker)
        self.hardlink = hardlink
        self.maxBytes = maxBytes
        self.leasePeriod = leasePeriod
        self.leaseTimeout = leaseTimeout
        self.logger = logger
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

    /// What the item does now that its transfer would start. `.fetch` leaves it to the transfer driver.
    func decide(_ record: ItemRecord, _ item: RequestItem) -> StoreDecision {
        let digest = Self.digest(of: item)
        let present = digest.map { store.size(of: $0) != nil && !distrusted.contains($0) } ?? false
        var localFetcher: String? = nil
        var claim: StoreDecision.Claim? = nil
        if let digest, !present {
            if let flight = flights[digest], flight.key != record.key {
                localFetcher = flight.item
            } else if flights[digest] == nil {
                claim = readClaim(digest, waiter: record.key)
            } else {
                claim = .own
            }
        }
        return StoreDecision.decide(digest: digest, storeOn: true, entryPresent: present, localFetcher: localFetcher, claim: claim)
    }

    /// The claim on `digest` as `decide` needs it; a claim unchanged since this waiter first saw it
    /// for `leaseTimeout` (this process's clock), or whose process is gone, is stale — and one whose
    /// text names no process after a whole `leasePeriod` (its writer writes it right after the
    /// create: it is what a crash or a power cut left).
    private func readClaim(_ digest: String, waiter key: Int) -> StoreDecision.Claim {
        guard let holder = claims.holder(digest) else { return .none }
        if holder.isMine { return .own }
        if isStale(holder, digest: digest, waiter: key) { return .stale(item: holder.item) }
        return .live(item: "\(holder.item) on \(holder.worker)")
    }

    private func isStale(_ holder: StoreClaims.Holder, digest: String, waiter key: Int) -> Bool {
        if holder.isGone { return true }
        guard let wait = waiters[key], wait.digest == digest, let seen = wait.seen, seen == holder else { return false }
        return wait.seenSince.duration(to: .now) >= .seconds(holder.isUnreadable ? leasePeriod : leaseTimeout)
    }

    /// What `beginFetch` found once it held the claim (or could not get it).
    enum FetchStart { case fetch, waiting, inStore }

    /// The item fetches `digest`: claimed on the spool first (breaking a stale claim). `waiting`
    /// when another worker claimed it in between (`wait` was called); `inStore` when the entry
    /// arrived between the look and the claim (another worker's fetch ended just then): the
    /// claim is let go and the item publishes from the store.
    func beginFetch(_ record: ItemRecord, digest: String, breaking: Bool, credentials: [RequestHeader]) -> FetchStart {
        // The claim as it is now, judged again: only that very claim is broken (one renewed since
        // is not, and `breakClaim` puts back one renewed between this read and its rename).
        if breaking, let seen = claims.holder(digest), !seen.isMine, isStale(seen, digest: digest, waiter: record.key) {
            if claims.breakClaim(digest, seen: seen) {
                logger.warning("took over a stale store claim", metadata: ["item": "\(record.id)", "sha256": "\(digest)",
                                                                           "holder": "\(seen.item) on \(seen.worker)"])
            }
        }
        var claimed = false
        do {
            switch try claims.claim(digest, item: record.id) {
            case .claimed:
                claimed = true
            case .heldBy(let holder) where !holder.isMine:
                wait(record, digest: digest, by: "\(holder.item) on \(holder.worker)", elsewhere: true, credentials: credentials)
                return .waiting
            case .heldBy:
                claimed = true
            }
        } catch {
            // The store's claims folder unusable: fetch anyway (at worst twice), say why.
            logger.warning("could not claim a digest in the store; fetching without a claim: \(error)", metadata: ["item": "\(record.id)"])
        }
        if store.contains(digest) {
            if claimed { claims.release(digest) }
            return .inStore
        }
        stopWaiting(record.key)
        flights.begin(digest, key: record.key, item: record.id, claimed: claimed)
        scheduleCheck(Date().addingTimeInterval(waiters.isEmpty ? leasePeriod : Self.checkInterval))
        return .fetch
    }

    /// The item waits for the fetch `by` runs.
    func wait(_ record: ItemRecord, digest: String, by: String, elsewhere: Bool, credentials: [RequestHeader]) {
        if waiters[record.key] == nil {
            waiters.begin(record.key, StoreWaiters.Wait(digest: digest, by: by, elsewhere: elsewhere, credentials: credentials,
                                                         seen: elsewhere ? claims.holder(digest) : nil, seenSince: .now, since: Date()))
            logger.debug("waiting for another fetch of the same sha256", metadata: ["item": "\(record.id)", "sha256": "\(digest)", "fetched-by": "\(by)"])
        } else {
            waiters.fetched(record.key, by: by, elsewhere: elsewhere)
        }
        scheduleCheck(Date().addingTimeInterval(Self.checkInterval))
    }

    /// What `status` shows for a waiting item.
    func waitDescription(_ key: Int) -> String? {
        waiters[key].map { "waiting for sha256:\($0.digest.prefix(12))… fetched by \($0.by)" }
    }

    /// The item left its running phase (stopped, paused, cancelled): it waits no more.
    func forget(_ key: Int) {
        stopWaiting(key)
        mirrors.forget(key)
        if let copy = copying.removeValue(forKey: key) { release(copy.digest) }
    }

    /// Items running with no transfer: waiting for another's fetch, or being copied from the store
    /// (a stop must reach them too).
    var waitingKeys: [Int] { waiters.order + copying.keys.sorted() }

    /// Whether the item waits for another item's fetch (it then needs no connection).
    func isWaiting(_ key: Int) -> Bool { waiters[key] != nil }

    /// The waiter has to fetch and queues for a connection slot (see `slotGranted`).
    func awaitSlot(_ key: Int, credentials: [RequestHeader]) { waiters.awaitSlot(key, credentials: credentials) }

    /// The scheduler started `key`: its credentials when it is a waiter that asked for a slot
    /// (it decides again now), else nil.
    func slotGranted(_ key: Int) -> [RequestHeader]? { waiters.slotGranted(key) }

    func stopWaiting(_ key: Int) { waiters.stop(key) }

    /// An item's transfer would start: decides (`StoreDecision`) and carries out a hit or a wait.
    /// true when it did (the caller starts nothing), false when the item fetches (claimed first).
    /// `send` hands an event to the item's lifecycle; `openPart` opens a fresh part for it.
    func start(_ record: ItemRecord, _ item: RequestItem, credentials: [RequestHeader],
               send: (ItemEvent) -> Void, openPart: () throws(StoreError) -> StagingFile) -> Bool {
        for _ in 0..<3 {
            guard let digest = Self.digest(of: item) else { return false }
            switch decide(record, item) {
            case .hit:
                if publishFromStore(record, digest: digest, send: send, openPart: openPart, credentials: credentials) { return true }
                continue    // evicted between the look and the copy: decide again
            case .wait(let by, let elsewhere):
                wait(record, digest: digest, by: by, elsewhere: elsewhere, credentials: credentials)
                return true
            case .fetch(let claim, let breaking):
                if !claim { return false }
                switch beginFetch(record, digest: digest, breaking: breaking, credentials: credentials) {
                case .fetch: return false
                case .waiting: return true
                case .inStore: continue     // decide again: a hit now
                }
            }
        }
        return false
    }

    /// Whether the item's body came from the store (its marker says `source: "store"`).
    func servedFromStore(_ key: Int) -> Bool { fromStore.contains(key) }
    func itemEnded(_ key: Int) { fromStore.remove(key); stopWaiting(key); mirrors.forget(key) }

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
        flights.endAll()
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
                  result.job.marker.sha256 == wanted, !fromStore.contains(record.key) else { continue }
            // Only the fetch this body came from ends with its ingest: another item's body of the
            // digest (adopted, published while this worker fetches it) must not end that fetch,
            // or its claim would go and the next item of the digest fetch it a second time.
            let flight = flights.ingesting(wanted, by: record.key) ? record.key : nil
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
        if let flight, flights[digest]?.key == flight { flights.end(digest) }
        scheduleCheck(Date())
    }

    // MARK: Checks

    func scheduleCheck(_ at: Date) {
        if nextCheck.map({ at < $0 }) ?? true { nextCheck = at }
    }

    /// The checks due at `now`: flights whose item gave up are ended (claim released), claims
    /// renewed, and each waiting item decided again. Returns the waiting items that go on, with
    /// what they do (`hit` or `fetch`) and the credentials their start had.
    func check(now: Date, record: (Int) -> ItemRecord?) -> [(ItemRecord, StoreDecision, [RequestHeader])] {
        guard let due = nextCheck, due <= now else { return [] }
        nextCheck = nil
        saveCounters()
        flights.check(now: now, leasePeriod: leasePeriod) { flight in
            let phase = record(flight.key)?.phase
            guard phase != .running && phase != .publishing && phase != .waitingToPublish else { return false }
            logger.debug("a fetch for the store ended without its body; the next waiter fetches", metadata: ["item": "\(flight.item)"])
            return true
        }
        var goOn: [(ItemRecord, StoreDecision, [RequestHeader])] = []
        var fetchedNow: Set<String> = []
        for key in waiters.order {
            guard let wait = waiters[key], let waiter = record(key), waiter.phase == .running, let item = waiter.loaded else {
                stopWaiting(key)
                continue
            }
            // One waiter per digest goes on to fetch: the others see its flight at the next check.
            if fetchedNow.contains(wait.digest) { continue }
            // Queued for a slot to fetch with: it decides again once it has one.
            if waiters.awaitsSlot(key) { fetchedNow.insert(wait.digest); continue }
            if wait.elsewhere, let seen = claims.holder(wait.digest), seen != wait.seen { waiters.saw(key, seen) }
            let decision = decide(waiter, item)
            switch decision {
            case .wait(let by, let elsewhere):
                waiters.fetched(key, by: by, elsewhere: elsewhere)
            case .hit, .fetch:
                goOn.append((waiter, decision, wait.credentials))
            }
            if case .fetch = decision { fetchedNow.insert(wait.digest) }
        }
        // Waiters are checked often; fetches alone only need their claims renewed (and a given-up
        // fetch's claim released within a lease period), so an idle-ish daemon wakes rarely.
        if !waiters.isEmpty {
            scheduleCheck(now.addingTimeInterval(Self.checkInterval))
        } else if flights.anyFetching {
            scheduleCheck(now.addingTimeInterval(leasePeriod))
        }
        return goOn
    }

    func update(maxBytes: Int64) { self.maxBytes = maxBytes }
}
