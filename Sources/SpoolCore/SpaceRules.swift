import Foundation

/// One filesystem the daemon writes, as the shell read it (statvfs) for a decision: the core
/// decides on these figures and never reads a filesystem itself.
public struct FilesystemSpace: Sendable, Hashable {
    /// The folder on it (staging, or the final folder).
    public var path: String
    /// What it is, for messages (`tmpfs`, `ext4 on /dev/vda`, …).
    public var filesystem: String
    /// Bytes free to an unprivileged writer; nil when the filesystem does not say.
    public var free: Int64?
    /// Bytes in all; nil when the filesystem does not say (then nothing "never" fits it).
    public var capacity: Int64?
    /// Bytes `min-free` keeps free on it.
    public var minFree: Int64

    public init(path: String, filesystem: String, free: Int64?, capacity: Int64?, minFree: Int64) {
        self.path = path; self.filesystem = filesystem; self.free = free; self.capacity = capacity; self.minFree = minFree
    }
}

/// A filesystem too full to take an item, with the figures a user needs to act.
public struct SpaceShortage: Sendable, Hashable, CustomStringConvertible {
    public let folder: String
    public let filesystem: String
    public let free: Int64
    public let minFree: Int64
    /// The item's remaining expected bytes plus what running transfers still expect.
    public let needed: Int64

    public init(folder: String, filesystem: String, free: Int64, minFree: Int64, needed: Int64) {
        self.folder = folder
        self.filesystem = filesystem
        self.free = free
        self.minFree = minFree
        self.needed = needed
    }

    public var description: String {
        "\(folder) (\(filesystem)): \(free) bytes free, \(minFree) kept free, \(needed) needed"
    }
}

/// The disk-space decisions: whether an item's body fits now, later or never, what publishing
/// needs, and which waiting items go on when space is looked at again. Pure: the shell's
/// `SpaceGate` reads the filesystems and carries the answers out; the simulator decides with
/// the same rules over its simulated filesystems.
public enum SpaceRules {
    /// Room a publish needs beside the data: markers, journal lines.
    public static let publishHeadroom: Int64 = 64 << 10

    /// The default `min-free` of a filesystem of `capacity` bytes: 64 MiB, but never more than
    /// 5 % of it — a fixed 64 MiB could never be met on a 64 MiB tmpfs, and a drain would wait
    /// forever.
    public static func automaticMinFree(capacity: Int64) -> Int64 {
        min(64 << 20, capacity / 20)
    }

    /// Why `bytes` can never fit on `space`'s filesystem (more than it holds in all, less what
    /// `min-free` keeps); nil when they can, or its size is unknown.
    public static func never(bytes: Int64, on space: FilesystemSpace) -> String? {
        guard bytes > 0, let capacity = space.capacity, bytes > capacity - space.minFree else { return nil }
        return "\(bytes) bytes can never fit on \(space.path) (\(space.filesystem)): "
            + "\(capacity) bytes in all, \(space.free.map { "\($0) free now, " } ?? "")\(space.minFree) kept free (min-free)"
    }

    /// The first of `filesystems` that cannot take `needed` more bytes beside `reserved` (what
    /// running transfers still expect), keeping `min-free`; nil when all can.
    public static func shortage(needed: Int64, reserved: Int64, on filesystems: [FilesystemSpace]) -> SpaceShortage? {
        for space in filesystems {
            guard let free = space.free, free - space.minFree - reserved < needed else { continue }
            return SpaceShortage(folder: space.path, filesystem: space.filesystem, free: free, minFree: space.minFree,
                                 needed: needed + reserved)
        }
        return nil
    }

    /// Whether an item's remaining `needed` bytes fit: now, later (naming the filesystem that
    /// is short), or never (larger than a filesystem it must be on can ever hold).
    public static func answer(needed: Int64, reserved: Int64, on filesystems: [FilesystemSpace]) -> SpaceAnswer {
        for space in filesystems {
            if let why = never(bytes: needed, on: space) { return .never(reason: why) }
        }
        guard let short = shortage(needed: needed, reserved: reserved, on: filesystems) else { return .fits }
        return .later(reason: "not enough free space for its expected size: \(short)")
    }

    /// Whether a body of `total` bytes (its response's length), `needed` of them not in its part
    /// yet, fits beside `reserved`: asked at the body's first byte, when its headers give its size
    /// (a start knows only the expected size: `answer(needed:reserved:on:)`). Never when the
    /// whole body is larger than a filesystem it must be on can ever hold.
    public static func answer(body total: Int64, needed: Int64, reserved: Int64, on filesystems: [FilesystemSpace]) -> SpaceAnswer {
        for space in filesystems {
            if let why = never(bytes: total, on: space) { return .never(reason: why) }
        }
        guard let short = shortage(needed: needed, reserved: reserved, on: filesystems) else { return .fits }
        return .later(reason: "not enough free space for its \(total) bytes (from the response's headers): \(short)")
    }

    /// What publishing a verified body of `bytes` needs on the final folder's filesystem: room
    /// for its marker and the batch journal, and the whole body when the final folder is on
    /// another filesystem (`copies`: the publish is a copy, not a rename).
    public static func publishShortage(bytes: Int64, copies: Bool, final: FilesystemSpace) -> SpaceShortage? {
        let needed = copies ? bytes + publishHeadroom : publishHeadroom
        guard let free = final.free, free - final.minFree < needed else { return nil }
        return SpaceShortage(folder: final.path, filesystem: final.filesystem, free: free, minFree: final.minFree, needed: needed)
    }
}

/// Items waiting for disk space, in arrival order, and when to look at the free space again:
/// on a timer, only while something waits.
public struct SpaceQueue<Key: Hashable>: Sendable where Key: Sendable {
    public private(set) var waiting: [Key] = []
    /// When to look at the free space next; nil when nothing waits.
    public private(set) var checkAt: Date?
    /// How often free space is looked at while an item waits for it.
    public static var checkInterval: Double { 2 }

    public init() {}

    public var count: Int { waiting.count }
    public func contains(_ key: Key) -> Bool { waiting.contains(key) }

    /// `key` waits (once), behind those already waiting.
    public mutating func wait(_ key: Key, now: Date) {
        if !waiting.contains(key) { waiting.append(key) }
        if checkAt == nil { checkAt = now.addingTimeInterval(Self.checkInterval) }
    }

    /// `key` no longer waits (it fits, or it ended); with none left, no check is due.
    public mutating func leave(_ key: Key) {
        waiting.removeAll { $0 == key }
        if waiting.isEmpty { checkAt = nil }
    }

    /// On the timer: the waiting items that fit now, in arrival order. The first one that does
    /// not fit keeps the rest waiting, so a large item is not starved by small ones.
    public mutating func release(now: Date, fits: (Key) -> Bool) -> [Key] {
        guard let at = checkAt, at <= now else { return [] }
        checkAt = nil
        var released: [Key] = []
        var still: [Key] = []
        for key in waiting {
            if still.isEmpty && fits(key) { released.append(key) } else { still.append(key) }
        }
        waiting = still
        if !still.isEmpty { checkAt = now.addingTimeInterval(Self.checkInterval) }
        return released
    }
}
