import HeapModule

/// Removal leaves an item's heap entry behind, stale, skipped when it surfaces: O(1), no search.
/// Entries of items waiting hours for their earliest start surface only then, so a request of
/// 200,000 such items paused and resumed (or cancelled) left 200,000 stale entries per round,
/// which only their due time let go. Once stale entries outnumber the live ones (and are
/// many), the heaps are rebuilt from their live entries: O(entries), paid for by the removals
/// that made them stale.
extension Scheduler {
    mutating func compactIfMostlyStale() {
        let entries = future.count + readyCount + readyDiscretionaryCount
        guard entries > 4096, entries > 2 * queued.count else { return }
        let queued = self.queued
        future = Heap(future.unordered.filter { queued[$0.entry.key] == $0.entry.arrival })
        func live(_ heaps: [String: Heap<ReadyEntry>]) -> ([String: Heap<ReadyEntry>], Int) {
            var kept: [String: Heap<ReadyEntry>] = [:]
            var count = 0
            for (host, heap) in heaps {
                let entries = heap.unordered.filter { queued[$0.key] == $0.arrival }
                guard !entries.isEmpty else { continue }
                kept[host] = Heap(entries)
                count += entries.count
            }
            return (kept, count)
        }
        (ready, readyCount) = live(ready)
        (readyDiscretionary, readyDiscretionaryCount) = live(readyDiscretionary)
    }
}
