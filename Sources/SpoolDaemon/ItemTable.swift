import Foundation
import SpoolRequest
import SpoolStore

/// Every claimed request and its items, by name, by key and by staging base. Engine thread only.
final class ItemTable {
    private(set) var requests: [String: RequestRecord] = [:]
    private(set) var items: [Int: ItemRecord] = [:]
    /// Items that are neither waiting in the queue nor ended (running, retrying, waiting for
    /// space, paused, publishing): what a status report lists in full. Kept up to date by `note`.
    private(set) var active: [Int: ItemRecord] = [:]
    /// Items handed to the publisher, by staging base: its results name items by base. Only
    /// these are indexed so, to keep a waiting item small.
    private var publishing: [String: ItemRecord] = [:]
    private var lastKey = 0
    /// Every `host:port` the items use, once.
    let hosts = HostTable()

    var isEmpty: Bool { requests.isEmpty }

    /// Records an indexed request and creates its items (`lifecycle` builds each item's
    /// lifecycle). Only the index's summaries are kept, their hosts numbered in `hosts`.
    func add(claim: ClaimedRequest, index: RequestIndex, lifecycle: (ItemSummary) -> ItemLifecycle) -> RequestRecord {
        let request = RequestRecord(claim: claim, settings: index.settings, hosts: hosts)
        requests[claim.name] = request
        let hostIDs = index.hosts.map { hosts.id(of: $0) }
        request.items.reserveCapacity(index.items.count)
        if index.items.count > 1024 { items.reserveCapacity(items.count + index.items.count) }
        for summary in index.items {
            lastKey += 1
            let record = ItemRecord(key: lastKey, request: request, summary: summary.withHostID(hostIDs[Int(summary.hostID)]),
                                    lifecycle: lifecycle(summary))
            request.items.append(record)
            items[record.key] = record
        }
        // Every item is counted before any is queued or recovered: a recovered item may end at
        // once, and the group must not end before its later items are even known.
        request.open = Int32(request.items.count)
        return request
    }

    func request(named name: String) -> RequestRecord? { requests[name] }
    func item(_ key: Int) -> ItemRecord? { items[key] }
    /// Files the item under `active` or takes it out, after its phase changed.
    func note(_ record: ItemRecord) {
        switch record.phase {
        case .queued, .published, .failed: active.removeValue(forKey: record.key)
        default: active[record.key] = record
        }
    }

    /// Items handed to the publisher and not yet back for good: each holds its part open.
    var publishingCount: Int { publishing.count }

    /// The item a publish result names.
    func item(forBase base: String) -> ItemRecord? { publishing[base] }

    /// The item's job goes to the publisher: its results will name it by staging base.
    func awaitPublish(_ record: ItemRecord) { publishing[record.base] = record }

    /// The item's publishing is over (published, or failed for good).
    func publishOver(_ record: ItemRecord) { publishing.removeValue(forKey: record.base) }

    /// The request's group has ended: forget it and its items.
    func remove(_ request: RequestRecord) {
        requests.removeValue(forKey: request.name)
        for record in request.items {
            items.removeValue(forKey: record.key)
            active.removeValue(forKey: record.key)
            if record.publishJob != nil { publishing.removeValue(forKey: record.base) }
        }
    }
}
