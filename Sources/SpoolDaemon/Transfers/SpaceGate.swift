import Foundation
import SpoolCore
import Logging
import SpoolStore

/// Disk-space reservation, the shell's side: it reads the staging (and, if separate, the final)
/// filesystem and hands the figures to the core's `SpaceRules`, which decide — an item starts
/// only when the filesystems can take the rest of its expected size on top of what the running
/// transfers still expect, keeping `--min-free`. Items that cannot start wait in the core's
/// `SpaceQueue`, in arrival order, and free space is looked at on a timer — only while something
/// waits.
final class SpaceGate {
    private let layout: SpoolLayout
    /// Bytes kept free (`--min-free`; a reload may change it); nil: `SpaceRules.automaticMinFree`
    /// of each filesystem.
    var minFree: Int64?
    private let logger: Logger
    /// Whether the final folder is on the staging filesystem (its free space then counts once).
    private let finalSharesStagingFilesystem: Bool
    private var queue = SpaceQueue<Int>()
    private var waiting: [Int: ItemRecord] = [:]

    init(layout: SpoolLayout, minFree: Int64?, logger: Logger) {
        self.layout = layout
        self.minFree = minFree
        self.logger = logger
        finalSharesStagingFilesystem = layout.final.deviceID() == layout.staging.deviceID()
        folders = finalSharesStagingFilesystem ? [layout.staging] : [layout.staging, layout.final]
    }

    var waitingCount: Int { queue.count }
    /// When to look at the free space next; nil when nothing waits.
    var checkAt: Date? { queue.checkAt }

    /// The folders whose filesystems must hold a download: staging, and the final folder when it
    /// is on another filesystem.
    private let folders: [Directory]

    /// What does not change between two looks at a folder's filesystem, read once per folder:
    /// its description as messages name it (`ext4 at /`), and the automatic `min-free` of its
    /// capacity. Why: the description comes from parsing `/proc/self/mountinfo`, and every start
    /// and every body asked for it — a quarter of the daemon's CPU on 2,000 × 16 KiB over
    /// HTTPS/2 (issue 51, second round); an open folder's filesystem does not change under it.
    /// The automatic `min-free` is worked out again only if the capacity changes (a grown
    /// filesystem). A list, not a dictionary: it holds one or two folders, and comparing a path
    /// with the very string it was stored from costs less than hashing it at every start.
    private struct Known {
        let path: String
        let filesystem: String
        var capacity: Int64?
        var automaticMinFree: Int64
    }
    private var known: [Known] = []

    /// What `folder`'s filesystem looks like now, for the rules: one `statvfs`.
    private func space(of folder: Directory) -> FilesystemSpace {
        let figures = folder.spaceFigures()
        let capacity = figures?.capacity
        var i = 0
        while i < known.count && known[i].path != folder.path { i += 1 }
        if i == known.count {
            known.append(Known(path: folder.path, filesystem: folder.filesystemDescription(), capacity: capacity,
                               automaticMinFree: capacity.map(SpaceRules.automaticMinFree(capacity:)) ?? 0))
        } else if minFree == nil, known[i].capacity != capacity {
            known[i].capacity = capacity
            known[i].automaticMinFree = capacity.map(SpaceRules.automaticMinFree(capacity:)) ?? 0
        }
        return FilesystemSpace(path: folder.path, filesystem: known[i].filesystem, free: figures?.free,
                               capacity: capacity, minFree: minFree ?? known[i].automaticMinFree)
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

    /// The item's remaining expected bytes, and what the other running transfers still expect.
    private func demand(of record: ItemRecord, running: some Sequence<ItemRecord>) -> (needed: Int64, reserved: Int64) {
        var reserved: Int64 = 0
        for r in running where r !== record {
            guard let expected = r.spaceBytes else { continue }
            reserved += max(0, expected - r.bytesOnDisk)
        }
        return (max(0, (record.spaceBytes ?? 0) - record.bytesOnDisk), reserved)
    }

    /// Whether `record` fits beside the `running` items' remaining expected sizes; the
    /// filesystem that is short if not.
    func shortage(for record: ItemRecord, running: some Sequence<ItemRecord>) -> SpaceShortage? {
        let (needed, reserved) = demand(of: record, running: running)
        return SpaceRules.shortage(needed: needed, reserved: reserved, on: folders.map(space(of:)))
    }

    /// What an item waiting to publish lacks on the final folder's filesystem, if anything.
    func publishShortage(for record: ItemRecord) -> SpaceShortage? {
        SpaceRules.publishShortage(bytes: record.bytesOnDisk, copies: !finalSharesStagingFilesystem, final: space(of: layout.final))
    }

    /// The filesystems read once, for a status report: what each item waiting for space lacks,
    /// worked out from one read of each folder rather than two `statvfs` per waiting item (a full
    /// disk may hold thousands of them, and the report is written on the engine thread).
    struct Look {
        let spaces: [FilesystemSpace]
        let final: FilesystemSpace
        let copies: Bool
        /// What every running transfer still expects (a waiting item is never one of them).
        let reserved: Int64

        func shortage(for record: ItemRecord) -> SpaceShortage? {
            switch record.phase {
            case .waitingForSpace:
                return SpaceRules.shortage(needed: max(0, (record.spaceBytes ?? 0) - record.bytesOnDisk),
                                           reserved: reserved, on: spaces)
            case .waitingToPublish:
                return SpaceRules.publishShortage(bytes: record.bytesOnDisk, copies: copies, final: final)
            default:
                return nil
            }
        }
    }

    /// A `Look` at the filesystems now, nil when nothing waits for space (nothing is read then).
    func look(running: some Sequence<ItemRecord>) -> Look? {
        guard queue.count > 0 else { return nil }
        var reserved: Int64 = 0
        for r in running {
            guard let expected = r.spaceBytes else { continue }
            reserved += max(0, expected - r.bytesOnDisk)
        }
        return Look(spaces: folders.map(space(of:)), final: space(of: layout.final), copies: !finalSharesStagingFilesystem,
                    reserved: reserved)
    }

    /// Whether `record` fits: now, later (the filesystem that is short), or never.
    func answer(for record: ItemRecord, running: some Sequence<ItemRecord>) -> SpaceAnswer {
        let (needed, reserved) = demand(of: record, running: running)
        return SpaceRules.answer(needed: needed, reserved: reserved, on: folders.map(space(of:)))
    }

    /// Why a body of `total` bytes (the response's length) can never fit a filesystem it must be
    /// written to: staging, and the final folder when it is another filesystem. nil: it can, or
    /// its length is unknown.
    func never(body total: Int64?) -> String? {
        guard let total else { return nil }
        for folder in folders { if let why = SpaceRules.never(bytes: total, on: space(of: folder)) { return why } }
        return nil
    }

    /// Whether a body of `total` bytes, `needed` of them not in `record`'s file yet, fits beside
    /// what the other `running` transfers still expect: asked at the body's first byte, when
    /// its headers give its size (`BodyRoomAnswers`). The core's rule
    /// (`SpaceRules.answer(body:…)`), on the filesystems read once for both of its questions.
    func answer(body total: Int64, needed: Int64, for record: ItemRecord, running: some Sequence<ItemRecord>) -> SpaceAnswer {
        let reserved = demand(of: record, running: running).reserved
        return SpaceRules.answer(body: total, needed: needed, reserved: reserved, on: folders.map(space(of:)))
    }

    /// The staging filesystem for a body of unknown length: bytes free less `min-free` and less
    /// `SpaceRules.publishHeadroom` (what the daemon's own writes after it need: its state, the
    /// journal, the group's end, the status report, so that they never eat into `min-free`), and
    /// those figures as a message names them; nil when the filesystem does not say.
    func roomForUnsizedBody() -> (room: Int64, figures: String)? {
        let staging = space(of: layout.staging)
        guard let free = staging.free else { return nil }
        let all = staging.capacity.map { " of \($0)" } ?? ""
        return (free - staging.minFree - SpaceRules.publishHeadroom, "\(staging.path) (\(staging.filesystem)) down to \(free) bytes free\(all), "
                + "\(staging.minFree) kept free (min-free)")
    }

    /// Why a body of `bytes` can never be published into `folder` (a copy across filesystems
    /// needs the whole body there); nil when it can.
    func neverPublished(bytes: Int64, in folder: Directory) -> String? {
        finalSharesStagingFilesystem ? nil : SpaceRules.never(bytes: bytes, on: space(of: folder))
    }

    private func hasSpace(for record: ItemRecord, running: some Sequence<ItemRecord>) -> Bool {
        if record.phase == .waitingToPublish { return publishShortage(for: record) == nil }
        return shortage(for: record, running: running) == nil
    }

    /// The item waits for space: logged once at warning with the filesystem and its figures.
    func wait(_ record: ItemRecord, reason: String, running: some Sequence<ItemRecord>) {
        waiting[record.key] = record
        queue.wait(record.key, now: Date())
        var metadata: Logger.Metadata = ["item": "\(record.id)", "bytes": "\(record.bytesOnDisk)", "reason": "\(reason)"]
        let short = record.phase == .waitingToPublish ? publishShortage(for: record) : shortage(for: record, running: running)
        // Without a shortage now: a publish's final folder, or the staging filesystem a write hit ENOSPC on.
        let looked = short == nil ? space(of: record.phase == .waitingToPublish ? layout.final : layout.staging) : nil
        metadata["path"] = "\(short?.folder ?? looked?.path ?? "")"
        metadata["filesystem"] = "\(short?.filesystem ?? looked?.filesystem ?? "")"
        metadata["free"] = "\(short?.free ?? looked?.free ?? -1)"
        metadata["min-free"] = "\(short?.minFree ?? looked?.minFree ?? 0)"
        if let short { metadata["needed"] = "\(short.needed)" }
        logger.warning(record.phase == .waitingToPublish ? "waiting for disk space to publish; the verified file is kept"
                                                         : "waiting for disk space; the partial is kept", metadata: metadata)
    }

    func leave(_ record: ItemRecord) {
        waiting[record.key] = nil
        queue.leave(record.key)
    }

    /// On the timer: the waiting items that fit now, in arrival order (`SpaceQueue.release`).
    func release(now: Date, running: [ItemRecord]) -> [ItemRecord] {
        let keys = queue.release(now: now) { key in waiting[key].map { hasSpace(for: $0, running: running) } ?? true }
        return keys.compactMap { key in
            guard let record = waiting.removeValue(forKey: key) else { return nil }
            logger.info("disk space is back; resuming", metadata: ["item": "\(record.id)"])
            return record
        }
    }
}
