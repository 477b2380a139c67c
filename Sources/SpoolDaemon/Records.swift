import Foundation
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// A claimed request file while its items run.
final class RequestRecord {
    let claim: ClaimedRequest
    let file: RequestFile
    var items: [ItemRecord] = []
    /// Items that have not ended (published or failed) yet.
    var open = 0
    /// The group end has been handed to the I/O queue.
    var ending = false
    /// Publish-batch journals that record items of this request (see `JournalLedger`).
    var journals: [BatchJournal] = []
    /// Taken over from a dead worker (its items were recovered from the spool).
    var adopted = false

    var name: String { claim.name }
    var group: String { file.group }

    init(claim: ClaimedRequest, file: RequestFile) {
        self.claim = claim
        self.file = file
    }
}

/// What an item's transfers leave behind: its part, progress, validators and last response.
/// Allocated when the item first starts (or is recovered with a part), so a waiting item costs
/// only its `ItemRecord`.
final class ItemTransfer {
    /// The open partial, kept between attempts so a retry resumes it.
    var part: StagingFile?
    /// Bytes in the part and their running hash.
    var bytesOnDisk: Int64 = 0
    var hash: HashState?
    /// ETag (preferred) or Last-Modified of the partial's response: the If-Range validator.
    var etag: String?
    var lastModified: String?
    var startedAt: Date?
    var lastFailure: TransferFailure?
    var lastFacts: ResponseFacts?
    /// What the publisher was (or will be) given for it; kept to try again after a failed batch.
    var publishJob: PublishJob?
    /// The facts of the published file (its marker's content, `name` the final name): what the
    /// group marker lists for it under `markers: group`; for an item a 304 ended, the existing
    /// file's marker. nil otherwise (a per-file marker holds them; a large batch keeps none).
    var publishedMarker: ItemMarker?
    /// `on-exists: skip-unchanged`: the existing file's marker whose validators the transfer
    /// sent (`If-None-Match`/`If-Modified-Since`); a 304 ends the item with that file.
    var previousMarker: ItemMarker?
    /// Byte counts at recent status reports, for the rate and ETA.
    var rateWindow = RateWindow()
    /// When this item last failed to reach its host, until it reaches it again; and the seconds
    /// it spent so, in all (markers and `.error` report them apart from attempts).
    var outageStarted: Date?
    var outageSeconds: Double = 0
}

/// One item of a claimed request: its lifecycle, plus what its transfers left (`ItemTransfer`,
/// created on first use: most of a large batch is waiting, and waiting must stay small).
final class ItemRecord {
    let key: Int
    unowned let request: RequestRecord
    let item: RequestItem
    var lifecycle: ItemLifecycle
    /// Whether `staging/BASE.state` may exist (written for a failure or a resumable partial), so
    /// the group end removes it; clean items never had one.
    var hasStateFile = false
    private var transferState: ItemTransfer?

    init(key: Int, request: RequestRecord, item: RequestItem, lifecycle: ItemLifecycle) {
        self.key = key
        self.request = request
        self.item = item
        self.lifecycle = lifecycle
    }

    /// Staging base name: `staging/BASE.part`, `staging/BASE.state`.
    var base: String { SpoolStore.stagingBase(request.name, index: item.index) }
    var phase: ItemPhase { lifecycle.phase }
    var attempts: Int { lifecycle.attempts }
    var id: String { "\(request.name)#\(item.index)" }
    var validator: String? { etag ?? lastModified }

    private var transfer: ItemTransfer {
        if let t = transferState { return t }
        let t = ItemTransfer()
        transferState = t
        return t
    }

    var part: StagingFile? {
        get { transferState?.part }
        set { if newValue != nil || transferState != nil { transfer.part = newValue } }
    }
    var bytesOnDisk: Int64 {
        get { transferState?.bytesOnDisk ?? 0 }
        set { if newValue != 0 || transferState != nil { transfer.bytesOnDisk = newValue } }
    }
    var hash: HashState? {
        get { transferState?.hash }
        set { if newValue != nil || transferState != nil { transfer.hash = newValue } }
    }
    var etag: String? {
        get { transferState?.etag }
        set { if newValue != nil || transferState != nil { transfer.etag = newValue } }
    }
    var lastModified: String? {
        get { transferState?.lastModified }
        set { if newValue != nil || transferState != nil { transfer.lastModified = newValue } }
    }
    var startedAt: Date? {
        get { transferState?.startedAt }
        set { transfer.startedAt = newValue }
    }
    var lastFailure: TransferFailure? {
        get { transferState?.lastFailure }
        set { transfer.lastFailure = newValue }
    }
    var lastFacts: ResponseFacts? {
        get { transferState?.lastFacts }
        set { transfer.lastFacts = newValue }
    }
    var publishJob: PublishJob? {
        get { transferState?.publishJob }
        set { if newValue != nil || transferState != nil { transfer.publishJob = newValue } }
    }
    var publishedMarker: ItemMarker? {
        get { transferState?.publishedMarker }
        set { if newValue != nil || transferState != nil { transfer.publishedMarker = newValue } }
    }
    var previousMarker: ItemMarker? {
        get { transferState?.previousMarker }
        set { if newValue != nil || transferState != nil { transfer.previousMarker = newValue } }
    }
    /// `markers: item` (the default): each published file gets its `NAME.done`.
    var writesItemMarker: Bool { request.file.markers == .item }
    var rateWindow: RateWindow {
        get { transferState?.rateWindow ?? RateWindow() }
        set { transfer.rateWindow = newValue }
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

    /// Forgets the partial's bytes: the next attempt starts from byte 0.
    func discardPartial() {
        bytesOnDisk = 0
        hash = nil
        etag = nil
        lastModified = nil
    }
}
