import Foundation
import Logging
import SpoolStore

/// Disk-space reservation: an item starts only when the staging (and, if separate, the final)
/// filesystem can take the rest of its expected size on top of what the running transfers still
/// expect, keeping `--min-free`. Items that cannot start wait here, in arrival order, and free
/// space is looked at on a timer — only while something waits.
final class SpaceGate {
    private let layout: SpoolLayout
    /// Bytes kept free (`--min-free`; a reload may change it).
    var minFree: Int64
    private let logger: Logger
    /// Whether the final folder is on the staging filesystem (its free space then counts once).
    private let finalSharesStagingFilesystem: Bool
    private var waiting: [ItemRecord] = []
    /// When to look at the free space next; nil when nothing waits.
    private(set) var checkAt: Date?

    /// How often free space is looked at while an item waits for it.
    static let checkInterval: Double = 2

    init(layout: SpoolLayout, minFree: Int64, logger: Logger) {
        self.layout = layout
        self.minFree = minFree
        self.logger = logger
        finalSharesStagingFilesystem = layout.final.deviceID() == layout.staging.deviceID()
    }

    var waitingCount: Int { waiting.count }

    /// Whether `record` fits beside the `running` items' remaining expected sizes.
    func hasSpace(for record: ItemRecord, running: some Sequence<ItemRecord>) -> Bool {
        let needed = max(0, (record.expectedBytes ?? 0) - record.bytesOnDisk)
        var reserved: Int64 = 0
        for r in running {
            guard let expected = r.expectedBytes else { continue }
            reserved += max(0, expected - r.bytesOnDisk)
        }
        var folders = [layout.staging]
        if !finalSharesStagingFilesystem { folders.append(layout.final) }
        for folder in folders {
            guard let free = folder.freeBytes() else { continue }
            if free - minFree - reserved < needed { return false }
        }
        return true
    }

    func wait(_ record: ItemRecord, reason: String) {
        waiting.append(record)
        if checkAt == nil { checkAt = Date().addingTimeInterval(Self.checkInterval) }
        logger.warning("waiting for disk space; the partial is kept", metadata: [
            "item": "\(record.id)", "bytes": "\(record.bytesOnDisk)", "reason": "\(reason)",
            "free": "\(layout.staging.freeBytes() ?? -1)", "min-free": "\(minFree)"])
    }

    func leave(_ record: ItemRecord) {
        waiting.removeAll { $0 === record }
        if waiting.isEmpty { checkAt = nil }
    }

    /// On the timer: the waiting items that fit now, in arrival order (the first one that does
    /// not fit keeps the rest waiting, so a large item is not starved by small ones).
    func release(now: Date, running: [ItemRecord]) -> [ItemRecord] {
        guard let at = checkAt, at <= now else { return [] }
        checkAt = nil
        var released: [ItemRecord] = []
        var still: [ItemRecord] = []
        for record in waiting {
            if still.isEmpty && hasSpace(for: record, running: running)
                && (layout.staging.freeBytes() ?? Int64.max) > minFree {
                logger.info("disk space is back; resuming", metadata: ["item": "\(record.id)"])
                released.append(record)
            } else {
                still.append(record)
            }
        }
        waiting = still
        if !still.isEmpty { checkAt = now.addingTimeInterval(Self.checkInterval) }
        return released
    }
}
