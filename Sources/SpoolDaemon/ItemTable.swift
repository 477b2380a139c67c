import Foundation
import SpoolRequest
import SpoolStore

/// Every claimed request and its items, by name, by key and by staging base. Engine thread only.
final class ItemTable {
    private(set) var requests: [String: RequestRecord] = [:]
    private(set) var items: [Int: ItemRecord] = [:]
    /// Staging base → item key, to match the publisher's results.
    private var keysByBase: [String: Int] = [:]
    private var lastKey = 0

    var isEmpty: Bool { requests.isEmpty }

    /// Records a parsed request and creates its items (`lifecycle` builds each item's lifecycle).
    func add(claim: ClaimedRequest, file: RequestFile, lifecycle: (RequestItem) -> ItemLifecycle) -> RequestRecord {
        let request = RequestRecord(claim: claim, file: file)
        requests[claim.name] = request
        for item in file.items {
            lastKey += 1
            let record = ItemRecord(key: lastKey, request: request, item: item, lifecycle: lifecycle(item))
            request.items.append(record)
            items[record.key] = record
            keysByBase[record.base] = record.key
        }
        // Every item is counted before any is queued or recovered: a recovered item may end at
        // once, and the group must not end before its later items are even known.
        request.open = request.items.count
        return request
    }

    func request(named name: String) -> RequestRecord? { requests[name] }
    func item(_ key: Int) -> ItemRecord? { items[key] }
    func item(forBase base: String) -> ItemRecord? { keysByBase[base].flatMap { items[$0] } }

    /// The request's group has ended: forget it and its items.
    func remove(_ request: RequestRecord) {
        requests.removeValue(forKey: request.name)
        for record in request.items {
            items.removeValue(forKey: record.key)
            keysByBase.removeValue(forKey: record.base)
        }
    }
}
