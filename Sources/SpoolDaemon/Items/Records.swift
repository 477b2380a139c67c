import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// A claimed request file while its items run. It keeps the file's settings, never its text:
/// an item's full description is re-read from the claimed file when it is needed.
final class RequestRecord {
    /// The request id: its name in this worker's folder.
    let name: String
    /// The claimed file's inode and folder (see `ClaimedRequest`; kept as plain facts, not the
    /// object, to keep a one-item request small).
    let inode: UInt64
    let folder: Directory
    let settings: RequestFileSettings
    /// The daemon's `host:port` table, which its items' `hostID`s index.
    let hosts: HostTable
    var items: [ItemRecord] = []
    /// Publish-batch journals that record items of this request (see `JournalLedger`).
    var journals: [BatchJournal] = []
    /// Its items not ended yet, and its group end (the core's `GroupMachine`; its 32-bit count
    /// and the flag packed after it keep a one-item request's record in one 144-byte malloc chunk).
    var groupEnd: GroupMachine
    /// Taken over from a dead worker (its items were recovered from the spool).
    var adopted = false
    /// Its owner, the claimed file's uid at claim (`ClaimedRequest.owner`); after the flags, where
    /// the record's padding was.
    let owner: uid_t

    var group: String { settings.group }
    /// The claim, for the store's calls (`endGroup`, `openFile`).
    var claim: ClaimedRequest { ClaimedRequest(name: name, inode: inode, folder: folder, owner: owner) }
    /// Its owner's name (or uid as text), for markers, status, events and hooks.
    var ownerName: String { SpoolAccounts.userName(owner) }

    /// `openItems`: how many items it has; every item is counted before any is queued or
    /// recovered (a recovered item may end at once, and the group must not end before its later
    /// items are even known).
    init(claim: ClaimedRequest, settings: RequestFileSettings, hosts: HostTable, openItems: Int) {
        name = claim.name
        inode = claim.inode
        folder = claim.folder
        owner = claim.owner
        self.settings = settings
        self.hosts = hosts
        groupEnd = GroupMachine(openItems: openItems)
    }

    /// Re-reads the full description of each of `records` (items of this request) from the
    /// claimed file, opened once and read in file order through one window (a group end reads
    /// every published item's URL: one `pread` each would be a system call per item, all in a
    /// row); nil for an item whose slice cannot be read or no longer matches what was accepted.
    func readItems(_ records: [ItemRecord]) -> [RequestItem?] {
        guard !records.isEmpty, let fd = try? claim.openFile() else { return records.map { _ in nil } }
        defer { close(fd) }
        let reader = RequestItemReader(fd: fd)
        var items = [RequestItem?](repeating: nil, count: records.count)
        for i in records.indices.sorted(by: { records[$0].summary.offset < records[$1].summary.offset }) {
            items[i] = try? records[i].read(with: reader)
        }
        return items
    }
}

/// The `host:port` keys of every item the daemon holds, each stored once: an item keeps only
/// its number. Engine thread only; it never shrinks (hosts are few).
final class HostTable {
    private var keys: [String] = []
    private var ids: [String: UInt32] = [:]

    func id(of key: String) -> UInt32 {
        if let id = ids[key] { return id }
        let id = UInt32(keys.count)
        keys.append(key)
        ids[key] = id
        return id
    }

    subscript(id: UInt32) -> String { keys[Int(id)] }
}

/// What an item's transfers leave behind: its part, progress, validators and last response.
/// Allocated when the item first starts (or is recovered with a part), so a waiting item costs
/// only its `ItemRecord`.
final class ItemTransfer {
    /// The item's full description (URL, name, headers, digest), re-read from the request file
    /// when it first starts; dropped when it ends.
    var item: RequestItem?
    /// See `ItemRecord.hasStateFile`.
    var hasStateFile = false
    /// What the part holds that a resume may build on (see `Partial`).
    var partial = Partial()
    var startedAt: Date?
    var lastFailure: TransferFailure?
    var lastFacts: ResponseFacts?
    /// The facts of the published file (its marker's content, `name` the final name): what the
    /// group marker lists for it under `markers: group`; for an item a 304 ended, the existing
    /// file's marker. nil otherwise (a per-file marker holds them; a large batch keeps none).
    var publishedMarker: ItemMarker?
    /// `on-exists: skip-unchanged`: the existing file's marker whose validators the transfer
    /// sent (`If-None-Match`/`If-Modified-Since`); a 304 ends the item with that file.
    var previousMarker: ItemMarker?
    /// Byte counts at recent status reports, for the rate and ETA.
    var rateWindow = RateWindow()
    /// See `ItemRecord.announcedBytes`.
    var announcedBytes: Int64?
    /// When this item last failed to reach its host, until it reaches it again; and the seconds
    /// it spent so, in all (markers and `.error` report them apart from attempts).
    var outageStarted: Date?
    var outageSeconds: Double = 0
    /// The refresh hook's URL, used instead of the request's from then on (kept in `B.state`).
    var refreshedURL: RequestURL?
    /// The attempt in which the refresh hook was last asked (0: never): once per attempt.
    var refreshedInAttempt = 0
    /// Which of its sources (`url`, mirrors) the item asks now; nil: its `url`.
    var sources: SourceRotation?
    /// `host:port` of the current source when it is a mirror (the scheduler's host for it).
    var sourceHost: String?
    /// An upload item's file as intake (or its first start) found it, its open descriptor while
    /// it is sent, and the response's body: see `Uploads.swift`. nil for a download.
    var upload: UploadState?

    /// What an ended item keeps, made afresh rather than cleared field by field: whether it left
    /// a state file (the group end removes it), its facts for a `markers: group` marker, and, when
    /// a 304 ended it, the response that says so. nil when it needs none of these.
    func remainder(endedUnchanged: Bool) -> ItemTransfer? {
        guard hasStateFile || publishedMarker != nil || endedUnchanged else { return nil }
        let kept = ItemTransfer()
        kept.hasStateFile = hasStateFile
        kept.publishedMarker = publishedMarker
        if endedUnchanged { kept.lastFacts = lastFacts }
        return kept
    }
}

/// One item of a claimed request: what the scheduler needs of it (`ItemSummary`: due time,
/// priority, sizes, host number, and where its lines are in the request file), its lifecycle,
/// and what its transfers left (`ItemTransfer`, created on first use: most of a large batch is
/// waiting, and waiting must stay small). Its URL, name and headers are not kept while it waits:
/// `load()` re-reads them from the claimed file when it starts.
final class ItemRecord {
    let key: Int
    unowned let request: RequestRecord
    /// Its `hostID` numbers the daemon's `HostTable`.
    let summary: ItemSummary
    var lifecycle: ItemLifecycle
    private var transferState: ItemTransfer?

    init(key: Int, request: RequestRecord, summary: ItemSummary, lifecycle: ItemLifecycle) {
        self.key = key
        self.request = request
        self.summary = summary
        self.lifecycle = lifecycle
    }

    /// An adopted item starts where its recovery plan put it: a machine made from that state
    /// (the machine's one way in besides `handle`).
    func recover(_ recovered: ItemLifecycle.Recovered, attempts: Int) {
        lifecycle = ItemLifecycle(recovered: recovered, firstQueued: lifecycle.firstQueued, attempts: attempts)
    }

    /// Staging base name: `staging/BASE.part`, `staging/BASE.state`.
    var base: String { SpoolStore.stagingBase(request.name, index: index) }
    var phase: ItemPhase { lifecycle.phase }
    var attempts: Int { lifecycle.attempts }
    var id: String { "\(request.name)#\(index)" }

    // What is kept while the item waits.
    /// 0-based position in the request file.
    var index: Int { Int(summary.index) }
    /// `host:port` of its URL (of the mirror it asks, once it moved on to one).
    var hostKey: String { transferState?.sourceHost ?? request.hosts[summary.hostID] }
    var earliestStart: Date? { summary.earliestStart }
    var expectedBytes: Int64? { summary.expectedBytes }
    /// The body's size as a response announced it when the item was cut to wait for space (see
    /// `BodyRoomAnswers`): without `expected-bytes`, the space rules wait for that much.
    var announcedBytes: Int64? {
        get { transferState?.announcedBytes }
        set { transfer.announcedBytes = newValue }
    }
    /// The size the space rules reserve for it: `expected-bytes`, else what a response announced.
    var spaceBytes: Int64? { expectedBytes ?? announcedBytes }
    var priority: Priority { summary.priority }
    var discretionary: Bool { summary.discretionary }

    // The rest, from the request file.
    /// The full description, while the item has one loaded (from its first start until it ends).
    var loaded: RequestItem? { transferState?.item }

    /// The full description: kept from now until the item ends. Fails when the claimed file can
    /// no longer be read, or its lines differ from when it was accepted (`changed-on-disk`).
    /// `slot`, when given, keeps the claimed file open for the next item's start.
    func load(keepingOpenIn slot: RequestFileSlot? = nil) throws(ItemReadError) -> RequestItem {
        if let item = transferState?.item { return item }
        let item: RequestItem
        if let slot {
            let reader: RequestItemReader
            do throws(StoreError) { reader = try slot.reader(for: request.claim) } catch { throw .store(error) }
            item = try read(with: reader)
        } else {
            let fd: Int32
            do throws(StoreError) { fd = try request.claim.openFile() } catch { throw .store(error) }
            defer { close(fd) }
            item = try read(from: fd)
        }
        transfer.item = item
        return item
    }

    /// The full description, loaded or read afresh (not kept); nil when it cannot be read.
    var details: RequestItem? {
        if let item = transferState?.item { return item }
        return request.readItems([self])[0]
    }

    /// The item's URL (empty when the request file can no longer be read).
    var url: String { details?.url.string ?? "" }

    /// Whether its transfer state is allocated (started, recovered, or ended keeping some).
    var holdsTransferState: Bool { transferState != nil }

    /// The item has ended: its transfer state gives way to what its group end still reads (see
    /// `ItemTransfer.remainder`). A list's ended items stay in memory until its last one ends;
    /// keeping each one's whole state (response facts, hash, rate samples) would grow memory with
    /// the list's length. The full description goes too (a group marker reads it again from the
    /// request file, by the item's own host: the mirror it ended on is forgotten).
    func shed() {
        transferState = transferState?.remainder(endedUnchanged: endedUnchanged)
    }

    /// Parses the item's slice of its request file, open as `fd`.
    func read(from fd: Int32) throws(ItemReadError) -> RequestItem {
        do {
            return try RequestParser.item(summary, hostKey: hostKey, settings: request.settings, descriptor: fd)
        } catch {
            throw .request(error)
        }
    }
    /// Parses the item's slice through `reader` (see `RequestItemReader`).
    func read(with reader: RequestItemReader) throws(ItemReadError) -> RequestItem {
        do {
            return try reader.item(summary, hostKey: hostKey, settings: request.settings)
        } catch {
            throw .request(error)
        }
    }
    /// The `If-Range` a resume of this item's part would send (nil: the part cannot be resumed).
    var validator: String? { ResumeValidator.ifRange(etag: etag, lastModified: lastModified) }

    private var transfer: ItemTransfer {
        if let t = transferState { return t }
        let t = ItemTransfer()
        transferState = t
        return t
    }

    /// Whether `staging/BASE.state` may exist (written for a failure or a resumable partial), so
    /// the group end removes it; clean items never had one. Kept with the transfer's leftovers
    /// (a state is only written for an item that ran, or recovered with one): a waiting item's
    /// record stays at 120 bytes, one 128-byte malloc chunk.
    var hasStateFile: Bool { transferState?.hasStateFile ?? false }
    /// The open part, held by the phase: a running item's, or its publish job's (see
    /// `ItemLifecycle.State`). A waiting item holds none, so open files stay within
    /// `DescriptorBudget` however many items wait.
    var part: StagingFile? { lifecycle.state.part }
    /// What the part holds that a resume may build on; changed only by `Partial`'s steps.
    var partial: Partial {
        get { transferState?.partial ?? Partial() }
        set { if !newValue.isEmpty || transferState != nil { transfer.partial = newValue } }
    }
    var keptRanges: [[Int64]]? { transferState?.partial.keptRanges }
    var bytesOnDisk: Int64 { transferState?.partial.bytes ?? 0 }
    var hash: HashState? { transferState?.partial.hash }
    var etag: String? { transferState?.partial.etag }
    var lastModified: String? { transferState?.partial.lastModified }
    var startedAt: Date? { transferState?.startedAt }
    var lastFailure: TransferFailure? { transferState?.lastFailure }
    var lastFacts: ResponseFacts? { transferState?.lastFacts }
    var publishedMarker: ItemMarker? { transferState?.publishedMarker }
    var previousMarker: ItemMarker? { transferState?.previousMarker }
    /// `markers: item` (the default): each published file gets its `NAME.done`.
    var writesItemMarker: Bool { request.settings.markers == .item }
    var rateWindow: RateWindow {
        get { transferState?.rateWindow ?? RateWindow() }
        set { transfer.rateWindow = newValue }
    }

    /// The refresh hook's URL, when it gave one.
    var refreshedURL: RequestURL? { transferState?.refreshedURL }
    var refreshedInAttempt: Int { transferState?.refreshedInAttempt ?? 0 }
    /// The source asked now (0: its `url`).
    var sourceIndex: Int { transferState?.sources?.current ?? 0 }
    var sources: SourceRotation? { transferState?.sources }
    var sourceHost: String? { transferState?.sourceHost }
    /// An upload item's file and response (allocates the transfer state: an upload item is
    /// never made dormant, so what intake found stays with it).
    var upload: UploadState { transferState?.upload ?? UploadState() }
    /// The upload's file, descriptor or response changed (see `Uploads.swift`).
    func noteUpload(_ state: UploadState) { transfer.upload = state }
    /// The URL a transfer asks for now: a mirror's once the item moved on to one; else the
    /// refreshed one, else the request's.
    var currentURL: RequestURL? {
        guard let item = loaded else { return nil }
        let source = sourceIndex
        if source > 0, source <= item.mirrors.count { return item.mirrors[source - 1] }
        return refreshedURL ?? item.url
    }

    // What its transfers leave changes only by these steps, each named for what happened (the
    // fields are read-only elsewhere): the compiler, not a convention, keeps them together.

    /// It starts for the first time (a download, an upload or a publish from the store): the
    /// time its marker reports as `startedAt`. Later starts keep the first.
    func noteStarted(at now: Date) {
        if transferState?.startedAt == nil { transfer.startedAt = now }
    }

    /// A response came (or none did): its facts, kept for the marker, the error file and status.
    func noteResponse(_ facts: ResponseFacts?) { transfer.lastFacts = facts }

    /// Its transfer failed: the failure status and the error file report.
    func noteFailure(_ failure: TransferFailure) { transfer.lastFailure = failure }

    /// `staging/BASE.state` was written (or found at recovery): the group end removes it.
    func noteStateFile() { transfer.hasStateFile = true }

    /// The refresh hook is asked in this attempt (once per attempt).
    func noteRefreshAsked() { transfer.refreshedInAttempt = attempts }

    /// The refresh hook's URL (or, at recovery, the one its dead worker kept): asked from now on.
    func noteRefreshedURL(_ url: RequestURL?) {
        if url != nil || transferState != nil { transfer.refreshedURL = url }
    }

    /// An attempt under `skip-unchanged` asks conditionally on `previous` (nil: it does not).
    func noteAskedConditionally(on previous: ItemMarker?) {
        // Most starts ask unconditionally and had not asked before: nothing to write then (a
        // marker is large, and writing nil over nil still moved it at every start).
        if previous != nil || transferState?.previousMarker != nil { transfer.previousMarker = previous }
    }

    /// The item ended with a published file: its facts, kept for a `markers: group` marker (or a
    /// 304's existing file).
    func notePublished(_ marker: ItemMarker) { transfer.publishedMarker = marker }

    /// It moved on to another of its sources; `host` is the mirror's `host:port` (nil: its `url`).
    func noteSource(_ rotation: SourceRotation, host: String?) {
        transfer.sources = rotation
        if host != nil || transferState != nil { transfer.sourceHost = host }
    }

    /// The item could not reach its host (again).
    func outageBegan(at now: Date) {
        if transfer.outageStarted == nil { transfer.outageStarted = now }
    }

    /// The item reached its host: the outage it saw is over.
    func outageEnded(at now: Date) {
        guard let t = transferState, let since = t.outageStarted else { return }
        t.outageSeconds += now.timeIntervalSince(since)
        t.outageStarted = nil
    }

    /// Whole seconds spent unable to reach the host (nil when none).
    func outageSeconds(at now: Date) -> Int? {
        guard let t = transferState else { return nil }
        let total = t.outageSeconds + (t.outageStarted.map { now.timeIntervalSince($0) } ?? 0)
        return total > 0 ? Int(total.rounded()) : nil
    }

}

/// Why an item's full description could not be read again from its claimed request file.
enum ItemReadError: Error, CustomStringConvertible {
    /// The claimed file could not be opened (or another file took its name).
    case store(StoreError)
    /// The slice could not be read, or it no longer reads as the accepted item.
    case request(RequestReadError)

    /// The errno of the call that failed; nil when the file read but no longer matched.
    var errno: Int32? {
        switch self {
        case .store(let e): e.errno
        case .request(.unreadable(_, let e)): e.errno
        case .request(.rejected): nil
        }
    }

    var description: String {
        switch self {
        case .store(let e): "the request file could not be opened again: \(e)"
        case .request(let e): "the item could not be read again from the request file: \(e)"
        }
    }
}
