import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolStore

/// The group-end room: what a request's `GroupMachine` (the core) decides is dispatched by the
/// core's `GroupEndExecutor` (the one the simulator runs too) to this room's ports — the group
/// marker, then the request file into `done/` or `failed/` (with `R.error`), on the I/O queue;
/// then the request forgotten and its group hook run; a failed end timed for another try, or let go.
final class GroupEnds {
    private let store: SpoolStore
    private let io: any IOSubmitting
    private let logger: Logger
    private let urls: URLPrivacy
    private let table: ItemTable
    private let ledger: JournalLedger
    private let requestFile: RequestFileSlot
    private let hooks: any GroupHookStarting
    private var retries = DueTimers<String>()
    /// The group machines' one executor, given this room as its ports (`GroupEndsPorts`); made
    /// with the room (not on first use: the first request's end then pays for it). Group events
    /// are sent to it directly, as item events are to the item executor.
    private(set) var executor: GroupEndExecutor<GroupEndsPorts>!

    init(store: SpoolStore, io: any IOSubmitting, logger: Logger, urls: URLPrivacy, table: ItemTable, ledger: JournalLedger,
         requestFile: RequestFileSlot, hooks: any GroupHookStarting) {
        self.urls = urls
        self.store = store
        self.io = io
        self.logger = logger
        self.table = table
        self.ledger = ledger
        self.requestFile = requestFile
        self.hooks = hooks
        executor = GroupEndExecutor(ports: GroupEndsPorts(room: self))
    }

    var nextRetry: Date? { retries.next }

    /// Tries again the failed group ends that are due.
    func retryDue(now: Date) {
        for name in retries.takeDue(now: now) {
            if let request = table.request(named: name) { executor.send(.retryDue, to: request, now: now) }
        }
    }

    /// A failed end: tried again when due (`retryDue`).
    fileprivate func retry(_ request: RequestRecord, at: Date) { retries.add(request.name, at: at) }

    /// Let go without an end. Its batch journals stay on disk (unlocked once dropped): the next
    /// run knows what was published.
    fileprivate func letGo(_ request: RequestRecord) { table.remove(request) }

    /// Hands the group end to the I/O queue.
    fileprivate func write(_ request: RequestRecord) {
        var groupItems: [GroupItem] = []
        var failures: [ItemFailure] = []
        // Items keep no URL once ended: the marker's are read again from the request file, opened
        // once (a failed item's failure record has its own; an item this request published
        // without a marker of its own kept its facts, URL included — see `ownFacts`).
        // Failed items past `listedFailuresLimit` are counted and streamed (`FailedItemsList`);
        // fewer are listed, those a request's cancel ended unstarted with their URL read again.
        let failedCount = request.items.reduce(0) { if case .failed = $1.lifecycle.state { $0 + 1 } else { $0 } }
        var failedList = failedCount > SpoolStore.listedFailuresLimit ? FailedItemsList(capacity: failedCount) : nil
        var hostKeys: [UInt32: String] = [:]
        var anyCancelled = false
        let published = request.items.filter {
            switch $0.lifecycle.state {
            // `ownFacts($0) == nil`, asked in place: this filter runs for every item of every group end.
            case .published: return $0.writesItemMarker || $0.endedUnchanged || $0.publishedMarker == nil
            case .failed(let failed): return failedList == nil && failed.facts.url.isEmpty
            default: return false
            }
        }
        var urls: [Int: String] = [:]
        var names: [Int: String] = [:]
        // The item whose ending ends the group still holds its description (it sheds it after).
        var unread: [ItemRecord] = []
        for record in published {
            if let item = record.loaded {
                urls[record.key] = item.url.string
                names[record.key] = item.name
            } else {
                unread.append(record)
            }
        }
        for (record, item) in zip(unread, request.readItems(unread)) {
            urls[record.key] = item?.url.string ?? ""
            names[record.key] = item?.name ?? ""
        }
        for record in request.items {
            if case .failed(let failed) = record.lifecycle.state {
                anyCancelled = anyCancelled || failed.code == "cancelled"
                if failedList != nil {
                    hostKeys[record.summary.hostID] = hostKeys[record.summary.hostID] ?? request.hosts[record.summary.hostID]
                    failedList?.add(ItemFailure(failed), summary: record.summary)
                    continue
                }
            }
            switch record.phase {
            case .published(let file, let marker):
                let requestURL = urls[record.key] ?? ""
                let own = ownFacts(record)
                // The marker's name: what follows the last `/` of its path (the final folder's
                // path, `/`, the name). Not `NSString.lastPathComponent`: bridging each path cost
                // 32,000 instructions, half of what ending a 2,000-item group cost.
                var markerName: String? = nil
                if let slash = marker.utf8.lastIndex(of: UInt8(ascii: "/")) {
                    markerName = String(marker[marker.utf8.index(after: slash)...])
                } else if !marker.isEmpty {
                    markerName = marker
                }
                var line = GroupItem(index: record.index, url: own?.url ?? self.urls.shown(requestURL),
                                     outcome: record.summary.isUpload ? "uploaded" : record.endedUnchanged ? "unchanged" : "published",
                                     file: file, marker: markerName)
                line.urlQuerySha256 = own.map(\.urlQuerySha256) ?? URLPrivacy.querySHA256(requestURL)
                // Without per-file markers the group marker carries each file's facts.
                if !record.writesItemMarker, let facts = record.publishedMarker { line.describe(facts) }
                groupItems.append(line)
            case .failed(let failed):
                var failure = ItemFailure(failed)
                if failure.url.isEmpty, let url = urls[record.key] {
                    failure.url = self.urls.shown(url)
                    failure.name = names[record.key] ?? ""
                }
                failures.append(failure)
                groupItems.append(GroupItem(index: record.index, url: failure.url, outcome: "failed",
                                            code: failure.code, message: failure.message, cause: failure.cause))
            default: break
            }
        }
        var groupMarker = GroupMarker(group: request.group, request: request.name, finishedAt: RFC3339.format(Date()),
                                      items: groupItems)
        groupMarker.owner = request.ownerName
        groupMarker.ownerUID = Int(request.owner)
        if let failedList {
            groupMarker.failed = failedList.count
            groupMarker.endings = failedList.endings
        }
        var failure = failedCount == 0 ? nil : ErrorRecord(
            request: request.name, code: "items-failed",
            message: "\(failedCount) of \(request.items.count) items failed"
                + (failedCount < request.items.count ? "; the others were published" : ""),
            items: failedList == nil ? failures : nil)
        failure?.owner = groupMarker.owner
        failure?.ownerUID = groupMarker.ownerUID
        failure?.endings = groupMarker.endings
        let marker = groupMarker, errorRecord = failure
        let claim = request.claim
        let bases = request.items.filter(\.hasStateFile).map(\.base)
        let store = self.store
        let removeCancelRecord = anyCancelled
        let lines = failedList?.lines(claim: claim, settings: request.settings, hostKeys: hostKeys, urls: self.urls)
        io.submit {
            do throws(StoreError) {
                let (path, journal) = try store.endGroup(claim, marker: marker, failure: errorRecord, failedItems: lines)
                for base in bases { store.removeStaging(base) }
                if removeCancelRecord { store.removeCancelRecord(of: claim) }
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

    /// The I/O queue's answer for the request `name`, handed to its group machine: ended (the
    /// request is forgotten, its group hook run), to be tried again, or let go (a drain: it stays
    /// in `active/`; taken over: it is the other worker's). Returns whether it was let go.
    func ended(_ name: String, markerPath: String?, journal: HeldLock?, error: StoreError?, drain: Bool) -> Bool {
        guard let request = table.request(named: name) else { return false }
        let event: GroupMachine.Event = error.map {
            .endFailed(GroupEndFault(takenOver: $0.isFenced, permanent: $0.isPermanent, inDrain: drain))
        } ?? .endWritten
        // Not nested (the I/O queue's answer comes in at the loop): the effects come back.
        let effects = executor.send(event, to: request, now: Date(),
                                    written: GroupEndWritten(markerPath: markerPath, journal: journal)) ?? []
        if let error { log(error, of: request, effects) }
        return request.groupEnd.phase == .abandoned
    }

    /// The group marker is written and the request filed: forget the request and its items, and
    /// run the group hook.
    fileprivate func forget(_ request: RequestRecord, markerPath: String?, journal: HeldLock?) {
        table.remove(request)
        ledger.release(request)
        requestFile.release(request.claim)
        let failed = request.items.filter { if case .failed = $0.phase { return true } else { return false } }.count
        logger.info("group ended", metadata: ["request": "\(request.name)", "group": "\(request.group)",
                                              "items": "\(request.items.count)", "failed": "\(failed)"])
        guard let markerPath, let journal else { return }
        hooks.groupEnded(journal: journal, markerPath: markerPath, group: request.group, request: request.name,
                         items: request.items.count, failed: failed, owner: request.ownerName)
    }

    /// A failed end's error, with what becomes of the request.
    private func log(_ error: StoreError, of request: RequestRecord, _ effects: [GroupMachine.Effect]) {
        let meta: Logger.Metadata = ["request": "\(request.name)", "group": "\(request.group)"]
        for effect in effects {
            switch effect {
            case .letGo(.takenOver):
                // Another worker took the request over while this one stalled past its lease:
                // that worker ends its group. Nothing of it is filed or hooked here.
                logger.error("dropped a request another worker took over while this worker was stalled; its group end is that worker's: \(error)",
                             metadata: meta)
            case .letGo(.permanent):
                logger.error("could not end the group, and retrying cannot help; the request stays in active/ for the next run: \(error)",
                             metadata: meta)
            case .retry:
                logger.error("could not end the group; will try again in \(Int(GroupMachine.retryDelay)) s: \(error)", metadata: meta)
            default: break
            }
        }
    }
}

/// What a written group end left, for the group hook: the group marker's path and the group's
/// journal (nil when the end was decided without a write's answer).
struct GroupEndWritten {
    var markerPath: String?
    var journal: HeldLock?
}

/// The group-end room as `GroupEndExecutor`'s ports: the machine is the request record's
/// `groupEnd`; each effect goes to the room. Not owned: the room owns the executor, which owns this.
final class GroupEndsPorts: GroupEndPorts {
    unowned let room: GroupEnds
    init(room: GroupEnds) { self.room = room }

    func decide(_ request: RequestRecord, _ event: GroupMachine.Event, now: Date) -> [GroupMachine.Effect] {
        request.groupEnd.handle(event, now: now)
    }

    func writeEnd(_ request: RequestRecord) { room.write(request) }
    func forget(_ request: RequestRecord, written: GroupEndWritten?) {
        room.forget(request, markerPath: written?.markerPath, journal: written?.journal)
    }
    func retry(_ request: RequestRecord, at: Date) { room.retry(request, at: at) }
    func letGo(_ request: RequestRecord, _ why: GroupLetGo) { room.letGo(request) }
}
