import Foundation
import Logging
import SpoolRequest
import SpoolStore

/// Ends a request's group once every item has ended: the group marker, then the request file
/// into `done/` or `failed/` (with `R.error`), on the I/O queue. A group end that fails keeps the
/// claim and is tried again — letting go would leave the request in this worker's folder with
/// nobody working on it, until a later worker adopted it and fetched everything again. Only a
/// drain lets go, of an error retrying cannot fix (`Result.abandoned`).
final class GroupCompletion {
    private let store: SpoolStore
    private let io: IOQueue
    private let logger: Logger
    private let urls: URLPrivacy
    private var retries = DueTimers<String>()

    /// How long a failed group end waits before it is tried again.
    static let retryDelay: Double = 5

    init(store: SpoolStore, io: IOQueue, logger: Logger, urls: URLPrivacy) {
        self.urls = urls
        self.store = store
        self.io = io
        self.logger = logger
    }

    var nextRetry: Date? { retries.next }

    /// Requests whose failed group end is due to be tried again.
    func dueRetries(now: Date) -> [String] { retries.takeDue(now: now) }

    /// Hands the group end to the I/O queue (once: a second call while one is under way is ignored).
    func end(_ request: RequestRecord) {
        guard !request.ending else { return }
        request.ending = true
        var groupItems: [GroupItem] = []
        var failures: [ItemFailure] = []
        // Items keep no URL once ended: the marker's are read again from the request file, opened
        // once (a failed item's failure record has its own; an item this request published
        // without a marker of its own kept its facts, URL included — see `ownFacts`).
        let published = request.items.filter {
            if case .published = $0.phase { return ownFacts($0) == nil } else { return false }
        }
        var urls: [Int: String] = [:]
        for (record, item) in zip(published, request.readItems(published)) { urls[record.key] = item?.url.string ?? "" }
        for record in request.items {
            switch record.phase {
            case .published(let file, let marker):
                let requestURL = urls[record.key] ?? ""
                var line = GroupItem(index: record.index, url: ownFacts(record)?.url ?? self.urls.shown(requestURL),
                                     outcome: record.summary.isUpload ? "uploaded" : record.endedUnchanged ? "unchanged" : "published",
                                     file: file, marker: marker.isEmpty ? nil : (marker as NSString).lastPathComponent)
                line.urlQuerySha256 = ownFacts(record).map(\.urlQuerySha256) ?? URLPrivacy.querySHA256(requestURL)
                // Without per-file markers the group marker carries each file's facts.
                if !record.writesItemMarker, let facts = record.publishedMarker { line.describe(facts) }
                groupItems.append(line)
            case .failed(let failure):
                failures.append(failure)
                groupItems.append(GroupItem(index: record.index, url: failure.url, outcome: "failed",
                                            code: failure.code, message: failure.message))
            default: break
            }
        }
        let marker = GroupMarker(group: request.group, request: request.name, finishedAt: RFC3339.format(Date()),
                                 items: groupItems)
        let errorRecord = failures.isEmpty ? nil : ErrorRecord(
            request: request.name, code: "items-failed",
            message: "\(failures.count) of \(request.items.count) items failed"
                + (failures.count < request.items.count ? "; the others were published" : ""), items: failures)
        let claim = request.claim
        let bases = request.items.filter(\.hasStateFile).map(\.base)
        let store = self.store
        io.submit {
            do throws(StoreError) {
                let (path, journal) = try store.endGroup(claim, marker: marker, failure: errorRecord)
                for base in bases { store.removeStaging(base) }
                return .groupEnded(request: claim.name, markerPath: path, journal: journal, error: nil)
            } catch {
                return .groupEnded(request: claim.name, markerPath: nil, journal: nil, error: error)
            }
        }
    }

    /// The facts of a file this request published without a marker of its own (kept for the
    /// group marker); nil otherwise — also for a file a 304 confirmed, whose facts are the
    /// earlier publication's, URL included.
    private func ownFacts(_ record: ItemRecord) -> ItemMarker? {
        record.writesItemMarker || record.endedUnchanged ? nil : record.publishedMarker
    }

    /// What became of a group end.
    enum Result {
        /// Ended for good: forget the request, run the group hook.
        case ended
        /// Failed; tried again in `retryDelay` (the claim is kept meanwhile).
        case willRetry
        /// Failed in a drain, of an error retrying cannot fix: the request is let go, still in
        /// `active/`, for the next run (a running daemon instead retries: an operator may fix it).
        case abandoned
    }

    /// The I/O queue's answer.
    func ended(_ request: RequestRecord, error: StoreError?, drain: Bool) -> Result {
        io.completed()
        guard let error else { return .ended }
        if drain && error.isPermanent {
            logger.error("could not end the group, and retrying cannot help; the request stays in active/ for the next run: \(error)",
                         metadata: ["request": "\(request.name)", "group": "\(request.group)"])
            return .abandoned
        }
        logger.error("could not end the group; will try again in \(Int(Self.retryDelay)) s: \(error)",
                     metadata: ["request": "\(request.name)", "group": "\(request.group)"])
        request.ending = false
        retries.add(request.name, at: Date().addingTimeInterval(Self.retryDelay))
        return .willRetry
    }
}
