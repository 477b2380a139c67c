import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// One-item request files whose item only waits (queued, never started, nothing on disk), each
/// kept as one 112-byte value in an array instead of a `RequestRecord` and an `ItemRecord` with
/// their dictionary entries.
///
/// Why: a spool of a million single-URL request files is a million requests of one item each.
/// As objects, each would cost several times its slot (two objects, two dictionary entries, a
/// one-element array); here it costs its slot, and the scheduler's entry. The records are made
/// again (`ItemTable.wake`, "waking" it) the moment something is about to change it: its start,
/// a control command, a resource-timeout check, a move to a mirror. A status listing reads a
/// detached copy and leaves it asleep.
///
/// The item's key says where it sleeps: `tag | serial << 32 | slot`. A slot is reused once
/// freed; the serial (the table's key counter) makes the reused slot's key differ, so a stale
/// key never finds the wrong request. Engine thread only.
struct DormantRequests {
    /// Set in every key of an item that was made dormant (and kept when it wakes).
    static let tag = 1 << 62

    /// What is kept of a dormant request: enough to build its records exactly as `ItemTable.add`
    /// did. Its settings are kept whole only when they say more than the file's name, markers and
    /// on-exists (`RequestFileSettings.isPlain`).
    struct Sleeper {
        let key: Int
        let name: String
        let inode: UInt64
        let folder: Directory
        /// The item's summary, its host numbered in the daemon's `HostTable`.
        let summary: ItemSummary
        /// `ItemLifecycle.firstQueued`, seconds since 2001.
        let firstQueued: Double
        /// The full settings when they are not plain.
        let settings: SettingsBox?
        let markers: MarkerMode
        let onExists: OnExists
        /// Taken over from a dead worker (`RequestRecord.adopted`).
        let adopted: Bool
        /// `RequestRecord.owner` (in the padding after the flags: the stride stays 112).
        let owner: uid_t

        var requestSettings: RequestFileSettings {
            settings?.value ?? .plain(fileName: name, markers: markers, onExists: onExists)
        }
    }

    /// Settings that are not plain, shared by reference (rare for single-URL files).
    final class SettingsBox {
        let value: RequestFileSettings
        init(_ value: RequestFileSettings) { self.value = value }
    }

    private var slots: ContiguousArray<Sleeper?> = []
    private var free: [UInt32] = []
    private(set) var count = 0

    /// The key an item gets if it is made dormant now (`ItemTable.add` asks before it creates
    /// the record). The slot stays free until `put`; if another request took it meanwhile, `put`
    /// refuses and the request just stays awake, so the engine puts a request to sleep in the
    /// same call that added it.
    func nextKey(serial: Int) -> Int {
        let slot = free.last.map(Int.init) ?? slots.count
        return Self.tag | (serial & 0x3FFF_FFFF) << 32 | slot
    }

    static func slot(of key: Int) -> Int { key & 0xFFFF_FFFF }

    /// Whether `key` was given by `nextKey`.
    static func isDormantKey(_ key: Int) -> Bool { key & tag != 0 }

    /// Puts `sleeper` in the slot its key names; false if that slot is taken (then it stays awake).
    mutating func put(_ sleeper: Sleeper) -> Bool {
        let slot = Self.slot(of: sleeper.key)
        if slot == slots.count {
            slots.append(sleeper)
        } else if slot < slots.count, slots[slot] == nil, free.last.map(Int.init) == slot {
            free.removeLast()
            slots[slot] = sleeper
        } else {
            return false
        }
        count += 1
        return true
    }

    /// The sleeper `key` names, if it still sleeps.
    func peek(_ key: Int) -> Sleeper? {
        guard Self.isDormantKey(key) else { return nil }
        let slot = Self.slot(of: key)
        guard slot < slots.count, let sleeper = slots[slot], sleeper.key == key else { return nil }
        return sleeper
    }

    /// Takes the sleeper out (it wakes); its slot is free again.
    mutating func take(_ key: Int) -> Sleeper? {
        guard let sleeper = peek(key) else { return nil }
        let slot = Self.slot(of: key)
        slots[slot] = nil
        free.append(UInt32(slot))
        count -= 1
        if count == 0 {
            slots = []
            free = []
        }
        return sleeper
    }

    /// Every sleeper's key, summary and first-queued time (seconds since 2001), in slot order,
    /// until `body` returns false. Read in place: no copy of the name, folder or settings, so no
    /// reference counting (the status scan passes over a million sleepers).
    func forEachWaiting(_ body: (_ key: Int, _ summary: ItemSummary, _ firstQueued: Double) -> Bool) {
        slots.withUnsafeBufferPointer { buffer in
            for i in buffer.indices {
                guard let key = buffer[i]?.key, let summary = buffer[i]?.summary,
                      let firstQueued = buffer[i]?.firstQueued else { continue }
                if !body(key, summary, firstQueued) { return }
            }
        }
    }

    /// The key of the sleeper of the request named `name`, by a scan (for operator commands only).
    func key(named name: String) -> Int? {
        for case let sleeper? in slots where sleeper.name == name { return sleeper.key }
        return nil
    }
}
