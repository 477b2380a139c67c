import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolStore

/// The group-end room: ends a request's group once every item has ended — the group marker,
/// then the request file into `done/` or `failed/` (with `R.error`), on the I/O queue — and then
/// forgets the request and runs its group hook. A group end that fails keeps the claim and is
/// tried again: letting go would leave the request in this worker's folder with nobody working
/// on it, until a later worker adopted it and fetched everything again. Only a drain lets go, of
/// an error retrying cannot fix (`Result.abandoned`).
final class GroupEnds {
    private let store: SpoolStore
    private let io: IOQueue
    private let logger: Logger
    private let urls: URLPrivacy
    private let table: ItemTable
    private let ledger: JournalLedger
    private let requestFile: RequestFileSlot
    private let hooks: HookDispatch
    private var retries = DueTimers<String>()

    /// How long a failed group end waits before it is tried again.
    static let retryDelay: Double = 5

    init(store: SpoolStore, io: IOQueue, logger: Logger, urls: URLPrivacy, table: ItemTable, ledger: JournalLedger,
         requestFile: RequestFileSlot, hooks: HookDispatch) {
        self.urls = urls
        self.store = store
        self.io = io
        self.logger = logger
        self.table = table
        self.ledger = ledger
        self.requestFile = requestFile
        self.hooks = hooks
    }

    var nextRetry: Date? { retries.next }

    /// Tries again the failed group ends that are due.
    func retryDue(now: Date) {
        for name in retries.takeDue(now: now) {
            if let request = table.request(named: name) { end(request) }
        }
    }

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
            case .failed(let failed):
                let failure = ItemFailure(failed)
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
    enum Result: Equatable {
        /// Ended for good: forget the request, run the group hook.
        case ended
        /// Failed; tried again in `retryDelay` (the claim is kept meanwhile).
        case willRetry
        /// Failed in a drain, of an error retrying cannot fix: the request is let go, still in
        /// `active/`, for the next run (a running daemon instead retries: an operator may fix it).
        case abandoned
    }

    /// The I/O queue's answer for the request `name`: ended (the request is forgotten, its group
    /// hook run), to be tried again, or let go (a drain: it stays in `active/`).
    func ended(_ name: String, markerPath: String?, journal: HeldLock?, error: StoreError?, drain: Bool) -> Result {
        guard let request = table.request(named: name) else { return .ended }
        let result = ended(request, error: error, drain: drain)
        switch result {
        case .ended: forget(request, markerPath: markerPath, journal: journal)
        case .willRetry: break
        case .abandoned:
            // Its batch journals stay on disk (unlocked once dropped): the next run knows what
            // was published.
            table.remove(request)
        }
        return result
    }

    /// The group marker is written and the request filed: forget the request and its items, and
    /// run the group hook.
    private func forget(_ request: RequestRecord, markerPath: String?, journal: HeldLock?) {
        table.remove(request)
        ledger.release(request)
        requestFile.release(request.claim)
        let failed = request.items.filter { if case .failed = $0.phase { return true } else { return false } }.count
        logger.info("group ended", metadata: ["request": "\(request.name)", "group": "\(request.group)",
                                              "items": "\(request.items.count)", "failed": "\(failed)"])
        guard let markerPath, let journal else { return }
        hooks.groupEnded(journal: journal, markerPath: markerPath, group: request.group, request: request.name,
                         items: request.items.count, failed: failed)
    }

    private func ended(_ request: RequestRecord, error: StoreError?, drain: Bool) -> Result {
        guard let error else { return .ended }
        if error.isFenced {
            // Another worker took the request over while this one stalled past its lease: that
            // worker ends its group. Nothing of it is filed or hooked here.
            logger.error("dropped a request another worker took over while this worker was stalled; its group end is that worker's: \(error)",
                         metadata: ["request": "\(request.name)", "group": "\(request.group)"])
            return .abandoned
        }
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
