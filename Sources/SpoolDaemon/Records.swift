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

/// One item of a claimed request: its lifecycle plus what its transfer left behind.
final class ItemRecord {
    let key: Int
    unowned let request: RequestRecord
    let item: RequestItem
    /// Staging base name: `staging/BASE.part`, `staging/BASE.state`.
    let base: String
    var lifecycle: ItemLifecycle
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
    /// Whether `staging/BASE.state` may exist (written for a failure or a resumable partial), so
    /// the group end removes it; clean items never had one.
    var hasStateFile = false
    /// Byte counts at recent status reports, for the rate and ETA.
    var rateWindow = RateWindow()

    init(key: Int, request: RequestRecord, item: RequestItem, lifecycle: ItemLifecycle) {
        self.key = key
        self.request = request
        self.item = item
        self.base = SpoolStore.stagingBase(request.name, index: item.index)
        self.lifecycle = lifecycle
    }

    var phase: ItemPhase { lifecycle.phase }
    var attempts: Int { lifecycle.attempts }
    var id: String { "\(request.name)#\(item.index)" }
    var validator: String? { etag ?? lastModified }

    /// Forgets the partial's bytes: the next attempt starts from byte 0.
    func discardPartial() {
        bytesOnDisk = 0
        hash = nil
        etag = nil
        lastModified = nil
    }
}
