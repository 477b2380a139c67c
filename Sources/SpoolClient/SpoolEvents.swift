import Foundation
import SpoolStore
import SpoolWatcher

/// One ending, as `spoolfetch events` prints it (one JSON object a line): an item published,
/// unchanged, uploaded or failed, a group ended, a request file rejected. Read from the spool's
/// own records — item markers and group markers in the final folder, error files in `rejected/`
/// — so no daemon keeps state for a consumer, and any number of consumers read the same records.
public struct SpoolEvent: Codable, Sendable, Hashable {
    /// `item`, `group` or `rejected`.
    public var event: String
    /// `published`, `unchanged`, `uploaded` or `failed` (item); `published` or `failed`
    /// (group: `failed` when any item failed); `rejected`.
    public var outcome: String
    public var request: String
    public var group: String?
    /// The item's index in its request file (item events).
    public var index: Int?
    public var url: String?
    /// The published file, an absolute path (item events that published or confirmed one).
    public var file: String?
    /// The record the event was read from: the item's `.done` marker, the group marker, or the
    /// rejected request's `.error` file; an absolute path.
    public var record: String
    public var bytes: Int64?
    public var sha256: String?
    /// Failures and rejections: the reason code and message (see the README's "Markers and
    /// error files").
    public var code: String?
    public var message: String?
    /// Group events: how many items were published and how many failed.
    public var published: Int?
    public var failed: Int?
    /// When the daemon ended it (`finishedAt`), or when the record appeared (rejections).
    public var at: String
    /// Resume after this event with `events --since CURSOR`.
    public var cursor: String
    /// The request's owner, from its record (`owner`), when the record says.
    public var owner: String? = nil
    /// An item ended by `deadline` or `cancelled`: what it waited on or last failed with.
    public var cause: FailureCause? = nil

    /// `REQUEST#INDEX` for an item, else the request's name: the id `status` and the control
    /// commands use.
    public var id: String { index.map { "\(request)#\($0)" } ?? request }
}

/// Where a consumer stopped: the record an event was read from — its ctime, folder and name,
/// the order events come in — and the event's place among that record's events (a group
/// marker yields its marker-less items, then the group).
///
/// Written `NANOSECONDS:FOLDER:SUB:NAME` (the name percent-encoded), so it is one shell word and
/// a consumer stores it as it is.
public struct EventCursor: Comparable, Sendable, Hashable, CustomStringConvertible {
    public var nanoseconds: Int64
    /// 0: the final folder, 1: `rejected/`.
    public var folder: Int
    public var name: String
    public var sub: Int

    static let folderNames = ["final", "rejected"]
    private static let plain = CharacterSet(charactersIn:
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+@,=")

    public init(nanoseconds: Int64, folder: Int, name: String, sub: Int) {
        self.nanoseconds = nanoseconds; self.folder = folder; self.name = name; self.sub = sub
    }

    public init?(_ text: String) {
        let parts = text.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, let ns = Int64(parts[0]), ns >= 0,
              let folder = Self.folderNames.firstIndex(of: parts[1]),
              let sub = Int(parts[2]), sub >= 0, let name = parts[3].removingPercentEncoding, !name.isEmpty
        else { return nil }
        self.init(nanoseconds: ns, folder: folder, name: name, sub: sub)
    }

    public var description: String {
        "\(nanoseconds):\(Self.folderNames[folder]):\(sub):\(name.addingPercentEncoding(withAllowedCharacters: Self.plain) ?? name)"
    }

    /// The record's place in the order, without the event's place within it.
    var record: RecordKey { RecordKey(nanoseconds: nanoseconds, folder: folder, name: name) }

    public static func < (a: EventCursor, b: EventCursor) -> Bool {
        if a.record != b.record { return a.record < b.record }
        return a.sub < b.sub
    }
}

/// A record's place in the order events are read in: by the inode's change time, which the
/// kernel sets when the record is renamed (or linked) into its folder, then by folder, then item
/// markers before group markers, then by name.
///
/// Why the third: the change time is the kernel's coarse clock (a tick of about 4 ms here), so a
/// group marker written just after its last item's marker often carries the same time; ordered by
/// name alone, `nightly.group.done` came out before `users.csv.done`, a group's ending before its
/// own item's. A group marker is always written after every marker of its items, so within one
/// tick it sorts after them.
struct RecordKey: Comparable, Hashable {
    var nanoseconds: Int64
    var folder: Int
    var name: String

    /// 1 for a group marker, 0 for anything else.
    var rank: Int { name.hasSuffix(".group.done") ? 1 : 0 }

    static func < (a: RecordKey, b: RecordKey) -> Bool {
        (a.nanoseconds, a.folder, a.rank, a.name) < (b.nanoseconds, b.folder, b.rank, b.name)
    }
}

/// Which endings a reader wants; the others' records are not even opened.
public struct EventKinds: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let items = EventKinds(rawValue: 1)
    public static let groups = EventKinds(rawValue: 2)
    public static let rejections = EventKinds(rawValue: 4)
    public static let all: EventKinds = [.items, .groups, .rejections]
}

/// Why events cannot be read.
public enum EventError: Error, CustomStringConvertible {
    case noSpool(String)
    case badCursor(String)
    case watch(WatcherError)

    public var description: String {
        switch self {
        case .noSpool(let s): return "\(s) is not a spool (no incoming/ folder); pass --spool or set SPOOLFETCH_SPOOL"
        case .badCursor(let c): return "malformed cursor '\(c)': pass a cursor exactly as events printed it (NANOSECONDS:FOLDER:SUB:NAME)"
        case .watch(let e): return "cannot watch for records: \(e)"
        }
    }
}

/// Reads the spool's endings in order, from a cursor on, and with `follow` waits (inotify, no
/// polling) for more.
///
/// **Why nothing is missed or repeated.** Records are ordered by their ctime, which the kernel
/// sets as it renames a record into place; a cursor is a record's place in that order. A record
/// is handed out only once it is `settle` old: two records landing within one clock tick may
/// become visible in the other order than their ctimes say, and by the time the later-stamped
/// one is handed out the earlier-stamped one is visible too. So a reader that resumes after a
/// cursor gets exactly the records after it. The price is that an event arrives `settle` (0.1 s)
/// late. A record whose inode changes later (a `chmod`, a hard link) is read again; one that a
/// consumer removed before it was read is not.
///
/// **Unordered** (`ordered: false`, for `wait`). The order, and the cursor that keeps it, has
/// a price a waiter must not pay: a record that becomes visible after one that sorts after it
/// was handed out (two group markers stamped with the same coarse clock tick, the later-named
/// one renamed into place first) sorts before the cursor and would be dropped. Unordered, every
/// record that lands is handed out, in no promised order, perhaps more than once (a folder
/// listed again after the kernel's queue overflowed); the caller takes endings idempotently.
///
/// **Wake-ups.** `wakeFolders` are watched too, without reading what lands there: `next`
/// returns (an empty batch, when no record is ready) and `takeWakeups` says which names
/// arrived, so a caller can look at the disk again on a second signal than the record alone.
///
/// One thread at a time calls `next`; `stop` may come from another (it only touches the
/// arrivals' eventfd), hence `@unchecked Sendable`.
public final class SpoolEventReader: @unchecked Sendable {
    public let spool: String
    public let finalFolder: String
    public let kinds: EventKinds
    public let follow: Bool
    /// How old (by its ctime) a record must be before it is handed out.
    public let settle: Double
    /// Whether the cursor keeps records in order and each one once (see "Unordered").
    public let ordered: Bool

    private var folders: [String] { [finalFolder, spool + "/rejected"] }
    /// Names that arrived in the wake folders (or in `rejected/` besides its records) since the
    /// last `takeWakeups`; `wakeAll` when any may have been missed (listed again).
    private var wakeNames: Set<String> = []
    private var wakeAll = false
    /// Whether wake-ups are kept at all (wake folders were asked for): other readers' `next`
    /// never returns an empty batch.
    private let wakes: Bool
    private let arrivals: FolderArrivals?
    /// Records seen and not yet handed out, by folder and name (a record replaced under the same
    /// name is keyed by its newest ctime).
    private var pending: [String: RecordKey] = [:]
    /// Settled records in order, handed out from `readyIndex` on.
    private var ready: [RecordKey] = []
    private var readyIndex = 0
    static let batchRecords = 512
    /// The last event handed out; nothing at or before it is handed out again.
    public private(set) var cursor: EventCursor?

    /// Lists the folders (after the watch is set up, with `follow`) and queues every record
    /// after `since`. `wakeFolders` (with `follow`): see "Wake-ups".
    public init(spool: String, finalFolder: String? = nil, kinds: EventKinds = .all, since: EventCursor? = nil,
                follow: Bool = false, settle: Double = 0.1, ordered: Bool = true,
                wakeFolders: [String] = []) throws(EventError) {
        guard FileManager.default.fileExists(atPath: spool + "/incoming") else { throw .noSpool(spool) }
        self.spool = spool
        self.finalFolder = finalFolder ?? spool + "/final"
        self.kinds = kinds
        self.follow = follow
        self.settle = settle
        self.ordered = ordered
        wakes = follow && !wakeFolders.isEmpty
        cursor = since
        if follow {
            do throws(WatcherError) {
                arrivals = try FolderArrivals(folders: [self.finalFolder, spool + "/rejected"] + wakeFolders)
            } catch {
                throw .watch(error)
            }
        } else {
            arrivals = nil
        }
        listAll()
    }

    /// The next events in order. Without `follow`: nil once every record there was at the start
    /// has been handed out. With `follow`: nil only when `deadline` passes first; with wake
    /// folders, an empty batch when only wake-ups came (`takeWakeups`).
    public func next(until deadline: Date? = nil) -> [SpoolEvent]? {
        while true {
            let now = Self.nowNanoseconds()
            let ripe = Int64(settle * 1e9)
            // Settled records are sorted once and handed out in batches: a backlog of a million
            // markers is sorted once, not once per batch. A record that lands later has a later
            // ctime than every settled one (it landed after they had settled), so it sorts after
            // them and may wait for the next round.
            if readyIndex >= ready.count {
                ready = pending.values.filter { $0.nanoseconds <= now - ripe }.sorted()
                readyIndex = 0
                for key in ready { pending[Self.slot(key.folder, key.name)] = nil }
            }
            if readyIndex < ready.count {
                let batch = ready[readyIndex..<min(ready.count, readyIndex + Self.batchRecords)]
                readyIndex += batch.count
                if readyIndex >= ready.count { ready = []; readyIndex = 0 }
                let events = batch.flatMap { read($0) }
                if !events.isEmpty {
                    cursor = EventCursor(events.last!.cursor)
                    return events
                }
                continue
            }
            if wakeAll || !wakeNames.isEmpty { return [] }
            if pending.isEmpty && !follow { return nil }
            // Wake when the oldest waiting record settles, a record lands, or the deadline passes.
            var wake = deadline
            if let oldest = pending.values.map(\.nanoseconds).min() {
                let settles = Date(timeIntervalSince1970: Double(oldest + ripe) / 1e9 + 0.001)
                wake = wake.map { min($0, settles) } ?? settles
            }
            guard let arrivals else {
                // Not following: the records are all listed; only their settling is waited for.
                if let wake { Thread.sleep(until: wake) }
                continue
            }
            switch arrivals.next(until: wake) {
            case .names(let names):
                for (folder, name) in names {
                    if folder < folders.count && isRecord(folder, name) { consider(folder, name) }
                    else if wakes && folder > 0 && !name.hasPrefix(".") { wakeNames.insert(name) }
                }
            case .listAgain:
                wakeAll = wakes
                listAll()
            case .timedOut:
                if let deadline, deadline.timeIntervalSinceNow <= 0 { return nil }
            case .interrupted:
                return nil
            }
        }
    }

    /// Makes a `next` that waits (now, or the next one) return nil; from any thread. For an
    /// `AsyncSequence` whose consumer stopped listening.
    public func stop() { arrivals?.interrupt() }

    /// Whether nothing listed is waiting to be handed out.
    public var isCaughtUp: Bool { pending.isEmpty && readyIndex >= ready.count }

    /// The names that arrived in the wake folders and `rejected/` (other than records) since
    /// the last call; nil when any may have been missed (a folder listed again): look at all.
    public func takeWakeups() -> Set<String>? {
        defer { wakeNames = []; wakeAll = false }
        return wakeAll ? nil : wakeNames
    }

    private func listAll() {
        for (index, folder) in folders.enumerated() {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for name in names { consider(index, name) }
        }
    }

    private static func slot(_ folder: Int, _ name: String) -> String { "\(folder)/\(name)" }

    private func isRecord(_ folder: Int, _ name: String) -> Bool {
        if name.hasPrefix(".") { return false }
        if folder == 1 { return kinds.contains(.rejections) && name.hasSuffix(".error") }
        if name.hasSuffix(".group.done") { return !kinds.isDisjoint(with: [.groups, .items]) }
        return kinds.contains(.items) && name.hasSuffix(".done")
    }

    private func consider(_ folder: Int, _ name: String) {
        guard isRecord(folder, name) else { return }
        var st = stat()
        guard lstat(folders[folder] + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return }
        let key = RecordKey(nanoseconds: Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec),
                            folder: folder, name: name)
        // Records up to the cursor's own were handed out (the cursor's own may have events left).
        if ordered, let cursor, key < cursor.record { return }
        pending[Self.slot(folder, name)] = key
    }

    /// The record's events after the cursor; none when it is not a record after all (a file
    /// whose name ends so but holds no such JSON).
    private func read(_ key: RecordKey) -> [SpoolEvent] {
        let path = folders[key.folder] + "/" + key.name
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        var events: [SpoolEvent] = []
        var owner: String?
        func add(_ event: SpoolEvent, sub: Int) {
            let place = EventCursor(nanoseconds: key.nanoseconds, folder: key.folder, name: key.name, sub: sub)
            if ordered, let cursor, place <= cursor { return }
            var event = event
            event.cursor = place.description
            event.owner = owner
            events.append(event)
        }
        let decoder = JSONDecoder()
        if key.folder == 1 {
            guard let record = try? decoder.decode(ErrorRecord.self, from: data) else { return [] }
            owner = record.owner
            add(SpoolEvent(event: "rejected", outcome: "rejected", request: record.request, record: path,
                           code: record.code, message: record.message, at: Self.rfc3339(key.nanoseconds), cursor: ""), sub: 0)
        } else if key.name.hasSuffix(".group.done") {
            guard let marker = try? decoder.decode(GroupMarker.self, from: data) else { return [] }
            owner = marker.owner
            var sub = 0
            // Items that have no marker of their own (failed, unchanged, uploaded, or all of them
            // under `markers: group`) end here.
            for item in marker.items where item.outcome != "published" || !(item.marker?.hasSuffix(".done") ?? false) {
                if kinds.contains(.items) {
                    var event = SpoolEvent(event: "item", outcome: item.outcome, request: marker.request, group: marker.group,
                                           index: item.index, url: item.url,
                                           file: item.outcome == "failed" ? nil : item.file.map { finalFolder + "/" + $0 },
                                           record: path, bytes: item.bytes, sha256: item.sha256, code: item.code,
                                           message: item.message, at: marker.finishedAt, cursor: "")
                    event.cause = item.cause
                    add(event, sub: sub)
                }
                sub += 1
            }
            if kinds.contains(.groups) {
                add(SpoolEvent(event: "group", outcome: marker.failed > 0 ? "failed" : "published", request: marker.request,
                               group: marker.group, record: path, published: marker.published, failed: marker.failed,
                               at: marker.finishedAt, cursor: ""), sub: sub)
            }
        } else {
            guard let marker = try? decoder.decode(ItemMarker.self, from: data) else { return [] }
            owner = marker.owner
            add(SpoolEvent(event: "item", outcome: "published", request: marker.request, group: marker.group,
                           index: marker.index, url: marker.url, file: finalFolder + "/" + marker.name, record: path,
                           bytes: marker.bytes, sha256: marker.sha256, at: marker.finishedAt, cursor: ""), sub: 0)
        }
        return events
    }

    static func nowNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    static func rfc3339(_ nanoseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(nanoseconds) / 1e9))
    }
}

extension SpoolEvent {
    /// The event as one JSON line (sorted keys, no escaped slashes).
    public var jsonLine: String {
        var bytes = SpoolJSON.encode(self)
        if bytes.last == 0x0A { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// One tab-separated line: cursor, event, outcome, id, path (the file, else the record),
    /// reason (and a deadline's or a cancel's cause).
    public var textLine: String {
        let reason = (code.map { c in message.map { "\(c): \($0)" } ?? c } ?? "") + (cause.map { " (cause \($0.code): \($0.message))" } ?? "")
        return [cursor, event, outcome, id, file ?? record, reason]
            .map { $0.replacingOccurrences(of: "\t", with: " ").replacingOccurrences(of: "\n", with: " ") }
            .joined(separator: "\t")
    }
}
