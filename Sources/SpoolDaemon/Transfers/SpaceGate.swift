import Foundation
import SpoolCore
import Logging
import SpoolStore

/// Disk-space reservation: an item starts only when the staging (and, if separate, the final)
/// filesystem can take the rest of its expected size on top of what the running transfers still
/// expect, keeping `--min-free`. Items that cannot start wait here, in arrival order, and free
/// space is looked at on a timer — only while something waits.
final class SpaceGate {
    private let layout: SpoolLayout
    /// Bytes kept free (`--min-free`; a reload may change it); nil: `automaticMinFree` of each
    /// filesystem.
    var minFree: Int64?
    private let logger: Logger
    /// Whether the final folder is on the staging filesystem (its free space then counts once).
    private let finalSharesStagingFilesystem: Bool
    private var waiting: [ItemRecord] = []
    /// When to look at the free space next; nil when nothing waits.
    private(set) var checkAt: Date?

    /// How often free space is looked at while an item waits for it.
    static let checkInterval: Double = 2

    /// The default `min-free` of a filesystem of `capacity` bytes: 64 MiB, but never more than
    /// 5 % of it — a fixed 64 MiB could never be met on a 64 MiB tmpfs, and a drain would wait
    /// forever.
    static func automaticMinFree(capacity: Int64) -> Int64 {
        min(64 << 20, capacity / 20)
    }

    init(layout: SpoolLayout, minFree: Int64?, logger: Logger) {
        self.layout = layout
        self.minFree = minFree
        self.logger = logger
        finalSharesStagingFilesystem = layout.final.deviceID() == layout.staging.deviceID()
    }

    var waitingCount: Int { waiting.count }

    /// The folders whose filesystems must hold a download: staging, and the final folder when it
    /// is on another filesystem.
    private var folders: [Directory] {
        finalSharesStagingFilesystem ? [layout.staging] : [layout.staging, layout.final]
    }

    /// What `minFree` keeps free on `folder`'s filesystem.
    func minFree(on folder: Directory) -> Int64 {
        if let minFree { return minFree }
        return folder.capacityBytes().map(Self.automaticMinFree(capacity:)) ?? 0
    }

    /// Why an explicit `min-free` can never be met on a filesystem the daemon writes (it is as
    /// large as the filesystem could ever have free); nil when it can.
    static func impossibleMinFree(_ minFree: Int64?, layout: SpoolLayout) -> String? {
        guard let minFree, minFree > 0 else { return nil }
        for folder in [layout.staging, layout.final] {
            guard let capacity = folder.capacityBytes(), minFree >= capacity else { continue }
            return "min-free \(minFree) can never be met on \(folder.path) (\(folder.filesystemDescription()), "
                + "\(capacity) bytes in all); set a smaller --min-free, or auto"
        }
        return nil
    }

    /// A filesystem too full to take an item.
    struct Shortage: CustomStringConvertible {
        let folder: String
        let filesystem: String
        let free: Int64
        let minFree: Int64
        /// The item's remaining expected bytes plus what running transfers still expect.
        let needed: Int64

        var description: String {
            "\(folder) (\(filesystem)): \(free) bytes free, \(minFree) kept free, \(needed) needed"
        }
    }

    /// Whether `record` fits beside the `running` items' remaining expected sizes; the
    /// filesystem that is short if not.
    func shortage(for record: ItemRecord, running: some Sequence<ItemRecord>) -> Shortage? {
        let needed = max(0, (record.expectedBytes ?? 0) - record.bytesOnDisk)
        var reserved: Int64 = 0
        for r in running where r !== record {
            guard let expected = r.expectedBytes else { continue }
            reserved += max(0, expected - r.bytesOnDisk)
        }
        for folder in folders {
            guard let free = folder.freeBytes() else { continue }
            let kept = minFree(on: folder)
            if free - kept - reserved < needed {
                return Shortage(folder: folder.path, filesystem: folder.filesystemDescription(), free: free,
                                minFree: kept, needed: needed + reserved)
            }
        }
        return nil
    }

    /// What an item waiting to publish needs now: on the final folder's filesystem, its whole
    /// body when the final folder is on another filesystem (a copy), else room for its marker and
    /// the batch journal (the data only changes its name).
    func publishShortage(for record: ItemRecord) -> Shortage? {
        let folder = layout.final
        let needed: Int64 = finalSharesStagingFilesystem ? Self.publishHeadroom : record.bytesOnDisk + Self.publishHeadroom
        guard let free = folder.freeBytes() else { return nil }
        let kept = minFree(on: folder)
        guard free - kept < needed else { return nil }
        return Shortage(folder: folder.path, filesystem: folder.filesystemDescription(), free: free, minFree: kept, needed: needed)
    }

    /// Room a publish needs beside the data: markers, journal lines.
    static let publishHeadroom: Int64 = 64 << 10

    /// Whether `record` fits: now, later (the filesystem that is short), or never (its body is
    /// larger than a filesystem it must be on can hold at all, less what `min-free` keeps).
    func answer(for record: ItemRecord, running: some Sequence<ItemRecord>) -> SpaceAnswer {
        let needed = max(0, (record.expectedBytes ?? 0) - record.bytesOnDisk)
        for folder in folders {
            if let why = never(bytes: needed, on: folder) { return .never(reason: why) }
        }
        guard let short = shortage(for: record, running: running) else { return .fits }
        return .later(reason: "not enough free space for its expected size: \(short)")
    }

    /// Why `bytes` can never fit on `folder`'s filesystem; nil when they can.
    func never(bytes: Int64, on folder: Directory) -> String? {
        guard bytes > 0, let capacity = folder.capacityBytes() else { return nil }
        let kept = minFree(on: folder)
        guard bytes > capacity - kept else { return nil }
        return "\(bytes) bytes can never fit on \(folder.path) (\(folder.filesystemDescription())): "
            + "\(capacity) bytes in all, \(kept) kept free (min-free)"
    }

    /// Why a body of `total` bytes (the response's length) can never fit a filesystem it must be
    /// written to: staging, and the final folder when it is another filesystem. nil: it can, or
    /// its length is unknown.
    func never(body total: Int64?) -> String? {
        guard let total else { return nil }
        for folder in folders { if let why = never(bytes: total, on: folder) { return why } }
        return nil
    }

    /// Why a body of `bytes` can never be published into `folder` (a copy across filesystems
    /// needs the whole body there); nil when it can.
    func neverPublished(bytes: Int64, in folder: Directory) -> String? {
        finalSharesStagingFilesystem ? nil : never(bytes: bytes, on: folder)
    }

    func hasSpace(for record: ItemRecord, running: some Sequence<ItemRecord>) -> Bool {
        if record.phase == .waitingToPublish { return publishShortage(for: record) == nil }
        return shortage(for: record, running: running) == nil
    }

    func wait(_ record: ItemRecord, reason: String, running: some Sequence<ItemRecord>) {
        waiting.append(record)
        if checkAt == nil { checkAt = Date().addingTimeInterval(Self.checkInterval) }
        var metadata: Logger.Metadata = ["item": "\(record.id)", "bytes": "\(record.bytesOnDisk)", "reason": "\(reason)"]
        if let short = record.phase == .waitingToPublish ? publishShortage(for: record) : shortage(for: record, running: running) {
            metadata["path"] = "\(short.folder)"
            metadata["filesystem"] = "\(short.filesystem)"
            metadata["free"] = "\(short.free)"
            metadata["min-free"] = "\(short.minFree)"
            metadata["needed"] = "\(short.needed)"
        } else if record.phase == .waitingToPublish {
            metadata["path"] = "\(layout.final.path)"
            metadata["filesystem"] = "\(layout.final.filesystemDescription())"
            metadata["free"] = "\(layout.final.freeBytes() ?? -1)"
            metadata["min-free"] = "\(minFree(on: layout.final))"
        } else {
            // A write that hit ENOSPC: the staging filesystem, as it looks now.
            metadata["path"] = "\(layout.staging.path)"
            metadata["filesystem"] = "\(layout.staging.filesystemDescription())"
            metadata["free"] = "\(layout.staging.freeBytes() ?? -1)"
            metadata["min-free"] = "\(minFree(on: layout.staging))"
        }
        logger.warning(record.phase == .waitingToPublish ? "waiting for disk space to publish; the verified file is kept"
                                                         : "waiting for disk space; the partial is kept", metadata: metadata)
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
            if still.isEmpty && hasSpace(for: record, running: running) {
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
