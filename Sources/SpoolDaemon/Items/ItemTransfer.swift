import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// What an item's transfers leave behind across its phases: three named fields, each a small
/// value, changed only by the steps below (their setters are `fileprivate`: the compiler, not a
/// convention, keeps every change in this file). What belongs to one phase is not here: a
/// running attempt's staging file, conditional marker and rate samples are its running phase's
/// (`RunningAttempt`), a publish job its publishing phase's, a published file's facts its
/// published phase's (`PublishedReceipt`). Allocated when the item first
/// starts (or is recovered with a part), so a waiting item costs only its `ItemRecord`.
final class ItemTransfer {
    /// Where it is fetched from.
    fileprivate(set) var source = ItemSource()
    /// What staging (or, for an upload, its outgoing file) holds of it.
    fileprivate(set) var staged = StagedBytes()
    /// What its attempts learned.
    fileprivate(set) var history = AttemptHistory()

    /// What an ended item keeps, made afresh rather than cleared field by field: whether it left
    /// a state file (the group end removes it) and, when a 304 ended it, the response that says
    /// so. nil when it needs neither (a published file's facts are its phase's, not kept here).
    func remainder(endedUnchanged: Bool) -> ItemTransfer? {
        guard staged.hasStateFile || endedUnchanged else { return nil }
        let kept = ItemTransfer()
        kept.staged.hasStateFile = staged.hasStateFile
        if endedUnchanged { kept.history.lastFacts = history.lastFacts }
        return kept
    }
}

/// Where an item is fetched from: its description as loaded, the refresh hook's URL, and which of
/// its sources it asks.
struct ItemSource {
    /// The item's full description (URL, name, headers, digest), re-read from the request file
    /// when it first starts; dropped when it ends.
    var item: RequestItem?
    /// The refresh hook's URL, used instead of the request's from then on (kept in `B.state`).
    var refreshedURL: RequestURL?
    /// Which of its sources (`url`, mirrors) the item asks now; nil: its `url`.
    var rotation: SourceRotation?
    /// `host:port` of the current source when it is a mirror (the scheduler's host for it).
    var host: String?
}

/// What staging holds of an item: the part's bytes and validators, whether a state file may
/// exist; for an upload, its outgoing file (`UploadState`: the identity intake saw, the
/// descriptor while it is sent, the response).
struct StagedBytes {
    /// What the part holds that a resume may build on (see `Partial`).
    var partial = Partial()
    /// See `ItemRecord.hasStateFile`.
    var hasStateFile = false
    /// nil for a download.
    var upload: UploadState?
}

/// What an item's staging part holds, as far as a resume may build on it: its length, the
/// running hash of those bytes, the validators of the response they came from (the next
/// `If-Range`), and a segmented part's ranges kept by a recovery. Every change is one of the
/// named steps below (`fileprivate`: only the record's `part…` steps in this file call them), so
/// the four facts cannot drift apart: bytes without their hash, or a hash of another response's
/// bytes.
struct Partial {
    /// Bytes in the part that a resume may build on (the in-order prefix).
    private(set) var bytes: Int64 = 0
    /// The hash of those bytes; nil when it must be computed again (after a restart).
    private(set) var hash: HashState?
    /// ETag (preferred) or Last-Modified of the response the bytes came from.
    private(set) var etag: String?
    private(set) var lastModified: String?
    /// A segmented part's ranges kept by a recovery in this boot (`ItemState.ranges`), for the
    /// next start only.
    private(set) var keptRanges: [[Int64]]?

    /// Nothing kept and nothing to resume with.
    var isEmpty: Bool { bytes == 0 && hash == nil && etag == nil && lastModified == nil && keptRanges == nil }

    /// Forgets the bytes and their validators: the next attempt starts from byte 0.
    fileprivate mutating func discard() {
        bytes = 0
        hash = nil
        keptRanges = nil
        etag = nil
        lastModified = nil
    }

    /// The part is empty again (a fresh file, or cut to 0); the validators stay until a response
    /// names new ones.
    fileprivate mutating func emptied() {
        bytes = 0
        hash = nil
        keptRanges = nil
    }

    /// The hash of the kept bytes, computed again before a resume.
    fileprivate mutating func rehashed(_ hash: HashState) { self.hash = hash }

    /// The kept ranges have gone into the transfer that starts now.
    fileprivate mutating func rangesTaken() { keptRanges = nil }

    /// A segmented transfer stopped without breaking a promise (`TransferOutcome.keptRanges`):
    /// its ranges past the prefix stay in the part for the next start.
    fileprivate mutating func keptRanges(_ ranges: [[Int64]]) { keptRanges = ranges }

    /// A response began: its validators are the part's from now on; `restartedFromZero`: the
    /// server sent the whole body again, so the bytes start over.
    fileprivate mutating func bodyBegan(etag: String?, lastModified: String?, restartedFromZero: Bool) {
        if restartedFromZero { bytes = 0 }
        self.etag = etag
        self.lastModified = lastModified
    }

    /// A transfer ended (or was stopped) with `bytes` in order in the part, hashed as `hash`.
    /// `validators`: the response's, when its body went into the part (a 200 or 206): an error
    /// page's or a 416's must not become the next resume's If-Range.
    fileprivate mutating func kept(bytes: Int64, hash: HashState?, validators: (etag: String?, lastModified: String?)?) {
        self.bytes = bytes
        self.hash = hash
        if let validators, validators.etag != nil || validators.lastModified != nil {
            etag = validators.etag
            lastModified = validators.lastModified
        }
    }

    /// What a recovery found usable: `bytes` to resume from with these validators (the hash is
    /// computed again before the transfer starts), and a segmented part's ranges.
    fileprivate mutating func recovered(bytes: Int64, etag: String?, lastModified: String?, ranges: [[Int64]]?) {
        self.bytes = bytes
        hash = nil
        self.etag = etag
        self.lastModified = lastModified
        keptRanges = ranges
    }

    /// A recovered part whose data is whole and verified, `bytes` long, on its way to the publisher.
    fileprivate mutating func recoveredWhole(bytes: Int64) { self.bytes = bytes }

    /// The item moves to another source: bytes are kept only under a strong ETag, which
    /// `If-Range` then checks at the new server; a date says nothing across servers.
    fileprivate mutating func movedToAnotherSource() {
        let strongETag = etag.map { !$0.hasPrefix("W/") } ?? false
        if bytes > 0 && !strongETag { discard() }
        lastModified = nil
    }

    /// An upload counts the bytes the server accepted (none until it accepted them all).
    fileprivate mutating func sent(_ bytes: Int64) { self.bytes = bytes }
}

/// What an item's attempts learned, kept across its phases for its markers, status, error file
/// and the next attempt's decisions.
struct AttemptHistory {
    /// Its first start (later starts keep it).
    var startedAt: Date?
    var lastFailure: TransferFailure?
    var lastFacts: ResponseFacts?
    /// See `ItemRecord.announcedBytes`.
    var announcedBytes: Int64?
    /// The attempt in which the refresh hook was last asked (0: never): once per attempt.
    var refreshedInAttempt = 0
    /// When this item last failed to reach its host, until it reaches it again; and the seconds
    /// it spent so, in all (markers and `.error` report them apart from attempts).
    var outageStarted: Date?
    var outageSeconds: Double = 0
}

// The record's view of its transfer state, and the only steps that change it, each named for
// what happened.
extension ItemRecord {
    /// The full description, while the item has one loaded (from its first start until it ends).
    var loaded: RequestItem? { transferState?.source.item }
    /// See `StagedBytes.hasStateFile`: whether `staging/BASE.state` may exist (written for a
    /// failure or a resumable partial), so the group end removes it; clean items never had one.
    var hasStateFile: Bool { transferState?.staged.hasStateFile ?? false }
    /// What the part holds that a resume may build on; changed only by the `part…` steps below.
    var partial: Partial { transferState?.staged.partial ?? Partial() }
    var keptRanges: [[Int64]]? { transferState?.staged.partial.keptRanges }
    var bytesOnDisk: Int64 { transferState?.staged.partial.bytes ?? 0 }
    var hash: HashState? { transferState?.staged.partial.hash }
    var etag: String? { transferState?.staged.partial.etag }
    var lastModified: String? { transferState?.staged.partial.lastModified }
    var startedAt: Date? { transferState?.history.startedAt }
    var lastFailure: TransferFailure? { transferState?.history.lastFailure }
    var lastFacts: ResponseFacts? { transferState?.history.lastFacts }
    /// The body's size as a response announced it when the item was cut to wait for space (see
    /// `BodyRoomAnswers`): without `expected-bytes`, the space rules wait for that much.
    var announcedBytes: Int64? { transferState?.history.announcedBytes }
    /// The facts of its published file, which its published phase keeps (see `PublishedReceipt`).
    var publishedMarker: ItemMarker? { lifecycle.state.receipt?.marker }
    /// The refresh hook's URL, when it gave one.
    var refreshedURL: RequestURL? { transferState?.source.refreshedURL }
    var refreshedInAttempt: Int { transferState?.history.refreshedInAttempt ?? 0 }
    /// The source asked now (0: its `url`).
    var sourceIndex: Int { transferState?.source.rotation?.current ?? 0 }
    var sources: SourceRotation? { transferState?.source.rotation }
    var sourceHost: String? { transferState?.source.host }
    /// An upload item's file and response (an upload item is never made dormant, so what intake
    /// found stays with it).
    var upload: UploadState { transferState?.staged.upload ?? UploadState() }

    /// Its description was read for its first start: kept until it ends.
    func noteLoaded(_ item: RequestItem) { transfer.source.item = item }

    /// It starts for the first time (a download, an upload or a publish from the store): the
    /// time its marker reports as `startedAt`. Later starts keep the first.
    func noteStarted(at now: Date) {
        if transferState?.history.startedAt == nil { transfer.history.startedAt = now }
    }

    /// A response came (or none did): its facts, kept for the marker, the error file and status.
    func noteResponse(_ facts: ResponseFacts?) { transfer.history.lastFacts = facts }

    /// Its transfer failed: the failure status and the error file report.
    func noteFailure(_ failure: TransferFailure) { transfer.history.lastFailure = failure }

    /// A response announced the body's size when the item was cut to wait for space.
    func noteAnnounced(bytes: Int64?) {
        if bytes != nil || transferState != nil { transfer.history.announcedBytes = bytes }
    }

    /// `staging/BASE.state` was written (or found at recovery): the group end removes it.
    func noteStateFile() { transfer.staged.hasStateFile = true }

    /// The refresh hook is asked in this attempt (once per attempt).
    func noteRefreshAsked() { transfer.history.refreshedInAttempt = attempts }

    /// The refresh hook's URL (or, at recovery, the one its dead worker kept): asked from now on.
    func noteRefreshedURL(_ url: RequestURL?) {
        if url != nil || transferState != nil { transfer.source.refreshedURL = url }
    }

    /// It moved on to another of its sources; `host` is the mirror's `host:port` (nil: its `url`).
    func noteSource(_ rotation: SourceRotation, host: String?) {
        transfer.source.rotation = rotation
        if host != nil || transferState != nil { transfer.source.host = host }
    }

    /// The upload's file, descriptor or response changed (see `Uploads.swift`).
    func noteUpload(_ state: UploadState) { transfer.staged.upload = state }

    /// The item could not reach its host (again).
    func outageBegan(at now: Date) {
        if transfer.history.outageStarted == nil { transfer.history.outageStarted = now }
    }

    /// The item reached its host: the outage it saw is over.
    func outageEnded(at now: Date) {
        guard let t = transferState, let since = t.history.outageStarted else { return }
        t.history.outageSeconds += now.timeIntervalSince(since)
        t.history.outageStarted = nil
    }

    /// Whole seconds spent unable to reach the host (nil when none).
    func outageSeconds(at now: Date) -> Int? {
        guard let t = transferState else { return nil }
        let total = t.history.outageSeconds + (t.history.outageStarted.map { now.timeIntervalSince($0) } ?? 0)
        return total > 0 ? Int(total.rounded()) : nil
    }

    // The part's steps (`Partial`'s, one each, called in place). Those that leave an empty part
    // empty allocate no transfer state for an item that has none (a waiting item's part is
    // empty); the others run on items that started or were recovered with a part.

    /// A part with nothing in it (a first start's) is left as it is: no step, no write.
    func partEmptied() {
        guard let t = transferState, t.staged.partial.bytes > 0 || t.staged.partial.hash != nil || t.staged.partial.keptRanges != nil else { return }
        t.staged.partial.emptied()
    }
    func partDiscarded() { transferState?.staged.partial.discard() }
    /// Only a part with kept ranges has any to take (the caller asks `keptRanges` first).
    func partRangesTaken() { transferState?.staged.partial.rangesTaken() }
    func partMovedToAnotherSource() { transferState?.staged.partial.movedToAnotherSource() }
    func partRehashed(_ hash: HashState) { transfer.staged.partial.rehashed(hash) }
    func partKeptRanges(_ ranges: [[Int64]]) { transfer.staged.partial.keptRanges(ranges) }
    func partBodyBegan(etag: String?, lastModified: String?, restartedFromZero: Bool) {
        transfer.staged.partial.bodyBegan(etag: etag, lastModified: lastModified, restartedFromZero: restartedFromZero)
    }
    func partKept(bytes: Int64, hash: HashState?, validators: (etag: String?, lastModified: String?)?) {
        transfer.staged.partial.kept(bytes: bytes, hash: hash, validators: validators)
    }
    /// A body taken whole from elsewhere (the content store): the part holds `bytes`, no more.
    func partFilled(bytes: Int64) {
        let t = transfer
        t.staged.partial.emptied()
        t.staged.partial.kept(bytes: bytes, hash: nil, validators: nil)
    }
    func partRecovered(bytes: Int64, etag: String?, lastModified: String?, ranges: [[Int64]]?) {
        transfer.staged.partial.recovered(bytes: bytes, etag: etag, lastModified: lastModified, ranges: ranges)
    }
    func partRecoveredWhole(bytes: Int64) { transfer.staged.partial.recoveredWhole(bytes: bytes) }
    /// An upload's bytes sent (0 at its start and when it failed).
    func uploadSent(_ bytes: Int64) { transfer.staged.partial.sent(bytes) }
}
