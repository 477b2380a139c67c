import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// Every claimed request and its items, by name, by key and by staging base. Engine thread only.
///
/// A one-item request whose item only waits is kept in `dormant` instead, without records; only
/// `wake(_:)` and `wakeRequest(named:)` make its records again. `items` and `requests` hold the
/// awake ones only.
final class ItemTable {
    private(set) var requests: [String: RequestRecord] = [:]
    private(set) var items: [Int: ItemRecord] = [:]
    /// Waiting one-item requests without records (see `DormantRequests`).
    private(set) var dormant = DormantRequests()
    /// Items that are neither waiting in the queue nor ended (running, retrying, waiting for
    /// space, paused, publishing): what a status report lists in full. Kept up to date by `note`.
    private(set) var active: [Int: ItemRecord] = [:]
    /// The keys of the active items that are not publishing (running, retrying, waiting for
    /// space, paused): with none of these, nothing queued and nothing dormant, only endings are
    /// left (`DrainWatch`).
    private(set) var busy: Set<Int> = []
    /// Items in phase publishing, by staging base (the publisher's results name items by base),
    /// derived from the phase by `note`. Only these are indexed so, to keep a waiting item small.
    private var publishing: [String: ItemRecord] = [:]
    private var lastKey = 0
    /// One-item requests taken in during this turn, put to sleep at its end (`sleepWaiting`) if
    /// their item still only waits: one the scheduler starts in the same turn is never put to
    /// sleep and woken again.
    private var drowsy: [RequestRecord] = []
    /// Every `host:port` the items use, once.
    let hosts = HostTable()

    var isEmpty: Bool { requests.isEmpty && dormant.count == 0 }
    /// Items held, awake or dormant.
    var itemCount: Int { items.count + dormant.count }

    /// Records an indexed request and creates its items (`lifecycle` builds each item's
    /// lifecycle). Only the index's summaries are kept, their hosts numbered in `hosts`.
    func add(claim: ClaimedRequest, index: RequestIndex, lifecycle: (ItemSummary) -> ItemLifecycle) -> RequestRecord {
        let request = RequestRecord(claim: claim, settings: index.settings, hosts: hosts, openItems: index.items.count)
        requests[claim.name] = request
        var hostIDs: [UInt32] = []
        hostIDs.reserveCapacity(index.hosts.count)
        for host in index.hosts { hostIDs.append(hosts.id(of: host)) }
        request.items.reserveCapacity(index.items.count)
        if index.items.count > 1024 { items.reserveCapacity(items.count + index.items.count) }
        for summary in index.items {
            lastKey += 1
            // A one-item request may be made dormant (`sleepIfWaiting`): its key says where.
            let key = index.items.count == 1 ? dormant.nextKey(serial: lastKey) : lastKey
            let record = ItemRecord(key: key, request: request, summary: summary.withHostID(hostIDs[Int(summary.hostID)]),
                                    lifecycle: lifecycle(summary))
            request.items.append(record)
            items[record.key] = record
        }
        return request
    }

    /// An awake request (a dormant one has no group end, journal or retry to look it up for).
    func request(named name: String) -> RequestRecord? { requests[name] }

    /// The request named `name`, woken if it is dormant (an operator's command names it).
    func wakeRequest(named name: String) -> RequestRecord? {
        if let request = requests[name] { return request }
        guard let key = dormant.key(named: name) else { return nil }
        return wake(key)?.request
    }

    /// The awake item `key` names; nil for a dormant one (see `wake`).
    func item(_ key: Int) -> ItemRecord? { items[key] }

    /// The item `key` names, its records made again if it is dormant: for the callers that are
    /// about to change it (the scheduler starts it, a check may end it). Only these wake a
    /// sleeper; a lookup (`item`) never does.
    func wake(_ key: Int) -> ItemRecord? {
        if let record = items[key] { return record }
        guard let sleeper = dormant.take(key) else { return nil }
        let (request, record) = Self.records(of: sleeper, hosts: hosts)
        requests[request.name] = request
        items[key] = record
        return record
    }

    /// Calls `body` with the item `key` names if it waits in the queue: its record, or for a
    /// dormant one a detached copy, valid during the call, while the item stays dormant (what a
    /// status listing reads).
    func withQueuedView(_ key: Int, _ body: (ItemRecord) -> Void) {
        if let record = items[key] {
            if record.phase == .queued { body(record) }
        } else if let sleeper = dormant.peek(key) {
            let (request, record) = Self.records(of: sleeper, hosts: hosts)
            withExtendedLifetime(request) { body(record) }
        }
    }

    /// A one-item request just queued is put to sleep at the end of this turn (`sleepWaiting`)
    /// if its item then still only waits.
    func sleepAtTurnEnd(_ request: RequestRecord) {
        if request.items.count == 1 { drowsy.append(request) }
    }

    /// Whether `sleepAtTurnEnd` named a request this turn (the loop asks before `sleepWaiting`).
    var hasDrowsy: Bool { !drowsy.isEmpty }

    /// The turn ends: the requests `sleepAtTurnEnd` named whose item was not started meanwhile
    /// go to sleep (one the scheduler started is passed over without a look at its table entry).
    func sleepWaiting() {
        guard !drowsy.isEmpty else { return }
        for request in drowsy where request.items.first?.phase == .queued { sleepIfWaiting(request) }
        drowsy.removeAll(keepingCapacity: drowsy.count <= 1024)
    }

    /// A one-item request queued, with nothing on disk and no attempt or start yet, is kept in
    /// `dormant` from now until something needs its records. Its item's key was chosen for it
    /// by `add`.
    func sleepIfWaiting(_ request: RequestRecord) {
        guard request.items.count == 1, let record = request.items.first, !record.holdsTransferState,
              record.phase == .queued, record.attempts == 0, requests[request.name] === request,
              DormantRequests.isDormantKey(record.key),
              request.journals.isEmpty, request.groupEnd.phase == .open(items: 1) else { return }
        let settings = request.settings
        let sleeper = DormantRequests.Sleeper(
            key: record.key, name: request.name, inode: request.inode, folder: request.folder, summary: record.summary,
            firstQueued: record.lifecycle.firstQueued.timeIntervalSinceReferenceDate,
            settings: settings.isPlain && settings.fileName == request.name ? nil : DormantRequests.SettingsBox(settings),
            markers: settings.markers, onExists: settings.onExists, adopted: request.adopted, owner: request.owner)
        guard dormant.put(sleeper) else { return }
        requests.removeValue(forKey: request.name)
        items.removeValue(forKey: record.key)
        active.removeValue(forKey: record.key)
        busy.remove(record.key)
    }

    /// The records a sleeper stands for, as `add` made them (not entered in the table).
    private static func records(of sleeper: DormantRequests.Sleeper, hosts: HostTable) -> (RequestRecord, ItemRecord) {
        let claim = ClaimedRequest(name: sleeper.name, inode: sleeper.inode, folder: sleeper.folder, owner: sleeper.owner)
        let request = RequestRecord(claim: claim, settings: sleeper.requestSettings, hosts: hosts, openItems: 1)
        request.adopted = sleeper.adopted
        let record = ItemRecord(key: sleeper.key, request: request, summary: sleeper.summary,
                                lifecycle: ItemLifecycle(firstQueued: Date(timeIntervalSinceReferenceDate: sleeper.firstQueued)))
        request.items = [record]
        return (request, record)
    }

    /// Files the item under `active` or takes it out, after its phase changed.
    func note(_ record: ItemRecord) {
        // Publishing is left only for an ending, so only an ending looks the base up to remove
        // it: the transitions of a large queue build no base names.
        switch record.phase {
        case .queued:
            active.removeValue(forKey: record.key)
            busy.remove(record.key)
        case .published, .failed:
            active.removeValue(forKey: record.key)
            busy.remove(record.key)
            if !publishing.isEmpty { publishing.removeValue(forKey: record.base) }
        case .publishing, .waitingToPublish:
            active[record.key] = record
            busy.remove(record.key)
            publishing[record.base] = record
        case .running, .retrying, .waitingForSpace, .paused:
            active[record.key] = record
            busy.insert(record.key)
        }
    }

    /// Items handed to the publisher and not yet back for good: each holds its part open.
    var publishingCount: Int { publishing.count }

    /// The item a publish result names.
    func item(forBase base: String) -> ItemRecord? { publishing[base] }

    /// The request's group has ended: forget it and its items.
    func remove(_ request: RequestRecord) {
        requests.removeValue(forKey: request.name)
        for record in request.items {
            items.removeValue(forKey: record.key)
            active.removeValue(forKey: record.key)
            busy.remove(record.key)
            if record.phase == .publishing || record.phase == .waitingToPublish { publishing.removeValue(forKey: record.base) }
        }
    }
}
