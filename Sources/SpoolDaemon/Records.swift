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
    /// The group end has been handed to the I/O thread.
    var ending = false
    /// Publish-batch journals that record items of this request: each is removed once every
    /// request it mentions has ended its group.
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

/// A publish batch's journal this worker wrote, held (locked) while any request it mentions is
/// still open: after a crash it is what tells an adopter that an item was already published.
final class BatchJournal {
    let lock: HeldLock
    /// Requests it mentions whose group has not ended.
    var openRequests = 0

    init(lock: HeldLock) { self.lock = lock }
}

/// Where an item is in its life (the in-memory side of the state table).
enum ItemPhase {
    case queued
    case running
    /// Waiting in the scheduler's timer heap for a retry.
    case retrying
    /// Waiting for free disk space (its partial kept); checked on a timer.
    case waitingForSpace
    /// Paused by the operator (`spoolfetch pause`); its partial is kept until `resume`.
    case paused
    case publishing
    case published(file: String, marker: String)
    case failed(ItemFailure)

    var hasEnded: Bool {
        switch self { case .published, .failed: return true; default: return false }
    }

    var label: String {
        switch self {
        case .queued: return "pending"
        case .running: return "running"
        case .retrying: return "retrying"
        case .waitingForSpace: return "waiting-space"
        case .paused: return "paused"
        case .publishing: return "publishing"
        case .published: return "done"
        case .failed: return "failed"
        }
    }
}

/// One item of a claimed request.
final class ItemRecord {
    let key: Int
    unowned let request: RequestRecord
    let item: RequestItem
    /// Staging base name: `staging/BASE.part`, `staging/BASE.state`.
    let base: String
    var phase: ItemPhase = .queued
    var attempts = 0
    /// The open partial, kept between attempts so a retry resumes it.
    var part: StagingFile?
    /// Bytes in the part and their running hash.
    var bytesOnDisk: Int64 = 0
    var hash: HashState?
    /// ETag (preferred) or Last-Modified of the partial's response: the If-Range validator.
    var etag: String?
    var lastModified: String?
    var firstQueued: Date
    var startedAt: Date?
    var lastFailure: TransferFailure?
    var lastFacts: ResponseFacts?
    /// Whether `staging/BASE.state` may exist (written for a failure or a resumable partial), so
    /// the group end removes it; clean items never had one.
    var hasStateFile = false
    /// Progress at the last status snapshot, for the rate.
    var sampledBytes: Int64 = 0
    var sampledAt: Date?

    init(key: Int, request: RequestRecord, item: RequestItem, now: Date) {
        self.key = key
        self.request = request
        self.item = item
        self.base = SpoolStore.stagingBase(request.name, index: item.index)
        self.firstQueued = now
    }

    var id: String { "\(request.name)#\(item.index)" }
    var validator: String? { etag ?? lastModified }
}
