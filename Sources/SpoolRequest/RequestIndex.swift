import Foundation

/// What a scheduler needs of one waiting item, and where to re-read the rest: 48 bytes
/// (`MemoryLayout<ItemSummary>.stride`), whatever the item's URL, name or headers.
///
/// Optional values are stored with sentinels (an `Int64?` would take 16 bytes with padding);
/// the public accessors turn them back into optionals.
public struct ItemSummary: Sendable, Hashable {
    /// File offset of the item's `url` line.
    public let offset: Int64
    private let earliestStartStored: Double     // seconds since 2001 (Date's reference); -inf: none
    private let expectedBytesStored: Int64      // -1: none
    /// Bytes from `offset` up to the next item (or the end of the file).
    public let length: UInt32
    /// 1-based line of the `url`.
    public let line: UInt32
    /// 0-based position in the file.
    public let index: UInt32
    /// Index into `RequestIndex.hosts` (or the table `withHostID` renumbered it for).
    public private(set) var hostID: UInt32
    /// FNV-1a of the item's lines: a re-read slice must match it.
    let checksum: UInt32
    public let priority: Priority
    public let discretionary: Bool
    /// The item has `mirror:` sources (found without re-reading it when its host is down).
    public let hasMirrors: Bool
    /// The item sends a file from `outgoing/` (`upload:`).
    public let isUpload: Bool

    init(offset: Int64, length: UInt32, line: UInt32, index: UInt32, hostID: UInt32, checksum: UInt32, earliestStart: Date?,
         expectedBytes: Int64?, priority: Priority, discretionary: Bool, hasMirrors: Bool = false, isUpload: Bool = false) {
        self.hasMirrors = hasMirrors
        self.isUpload = isUpload
        self.checksum = checksum
        self.offset = offset
        self.length = length
        self.line = line
        self.index = index
        self.hostID = hostID
        self.earliestStartStored = earliestStart?.timeIntervalSinceReferenceDate ?? -.infinity
        self.expectedBytesStored = expectedBytes ?? -1
        self.priority = priority
        self.discretionary = discretionary
    }

    /// Not started before this time; nil: at once.
    public var earliestStart: Date? {
        earliestStartStored == -.infinity ? nil : Date(timeIntervalSinceReferenceDate: earliestStartStored)
    }
    public var expectedBytes: Int64? { expectedBytesStored < 0 ? nil : expectedBytesStored }

    /// The same item with its host numbered in another table (a daemon interns hosts across
    /// all its request files, so a request need not keep its own list).
    public func withHostID(_ id: UInt32) -> ItemSummary {
        var copy = self
        copy.hostID = id
        return copy
    }
}

/// What a request file says for all its items, without any item: the file-level keys and the
/// defaults given before the first `url`. Small (no defaults given: no allocation), so a claimed
/// request can keep it while its items wait; an item's full description is re-read from its
/// slice of the file with it (`RequestParser.item(_:hostKey:settings:descriptor:)`).
public struct RequestFileSettings: Sendable {
    /// The request file's name (R).
    public let fileName: String
    public let group: String
    /// `markers:` (default `item`).
    public let markers: MarkerMode
    /// `on-exists:` given before the first url (default `keep-both`); an item's own value comes
    /// with its `RequestItem`.
    public let onExists: OnExists
    /// The values given before the first `url`; empty when none was (most files), so a file
    /// without defaults costs no allocation for them.
    private let defaultsStorage: [RequestFields]

    init(fileName: String, group: String, markers: MarkerMode, onExists: OnExists, defaults: RequestFields) {
        self.fileName = fileName
        self.group = group
        self.markers = markers
        self.onExists = onExists
        defaultsStorage = defaults == RequestFields() ? [] : [defaults]
    }

    /// The values given before the first `url` (re-applied when one item is re-read).
    var defaults: RequestFields { defaultsStorage.first ?? RequestFields() }

    /// `max-rate:`: bytes per second for all the file's items together; nil: only the daemon's cap.
    public var maxRate: Int64? { defaultsStorage.first?.maxRate }

    /// `deadline:` given before the first url: every item's, unless it gives its own.
    public var deadline: RequestDeadline? { defaultsStorage.first?.deadline }

    /// Nothing but the file's name, markers and on-exists: the group is the file's own and no
    /// defaults were given (most single-URL files). Such settings are rebuilt by
    /// `plain(fileName:markers:onExists:)`, so a waiting request need not keep them whole.
    public var isPlain: Bool { defaultsStorage.isEmpty && group == PlainName.sanitise(fileName) }

    /// The settings of a file that gives no `group` and no defaults (see `isPlain`).
    public static func plain(fileName: String, markers: MarkerMode, onExists: OnExists) -> RequestFileSettings {
        RequestFileSettings(fileName: fileName, group: PlainName.sanitise(fileName), markers: markers,
                            onExists: onExists, defaults: RequestFields())
    }
}

/// A validated request file without its text: the file-level facts, one `ItemSummary` per item,
/// and the distinct `host:port` keys its items use. Built by `RequestParser.index`; an item's
/// full description (`RequestItem`) is re-read from its slice of the file with
/// `RequestParser.item(_:in:…)` when it is about to start.
public struct RequestIndex: Sendable {
    /// The file-level keys and defaults.
    public let settings: RequestFileSettings
    /// In file order; `items[i].index == i`.
    public let items: [ItemSummary]
    /// `host:port` by `ItemSummary.hostID`.
    public let hosts: [String]
    /// The file's length when it was read.
    public let fileSize: Int64
    /// Items whose URL may expire before they start (for the intake warning).
    public var expiryNotes = ExpiryNotes()
    /// The upload items, for intake's check of their files in `outgoing/`.
    public var uploads: [UploadEntry] = []
    /// Items with a `deadline:` of their own, by index (few: most files give one for all, or none).
    public var itemDeadlines: [Int: RequestDeadline] = [:]

    /// The request file's name (R).
    public var fileName: String { settings.fileName }
    public var group: String { settings.group }
    /// `markers:` (default `item`).
    public var markers: MarkerMode { settings.markers }
    /// `on-exists:` given before the first url (default `keep-both`).
    public var onExists: OnExists { settings.onExists }
    var defaults: RequestFields { settings.defaults }

    public func hostKey(of item: ItemSummary) -> String { hosts[Int(item.hostID)] }

    /// Heap bytes held by the index (arrays' capacity and the host strings), for measurements.
    public var approximateHeapBytes: Int {
        items.capacity * MemoryLayout<ItemSummary>.stride + hosts.capacity * MemoryLayout<String>.stride
            + hosts.reduce(0) { $0 + ($1.utf8.count > 15 ? $1.utf8.count + 32 : 0) }
    }
}

/// Builds summaries, interning host keys.
struct SummarySink: RequestItemSink {
    var items: [ItemSummary] = []
    var hosts: [String] = []
    var hostIDs: [String: UInt32] = [:]
    var expiryNotes = ExpiryNotes()
    var uploads: [UploadEntry] = []
    var itemDeadlines: [Int: RequestDeadline] = [:]

    mutating func add(_ draft: ItemDraft, end: Int, defaults: RequestFields,
                      reject: (Int?, String, String) -> RequestRejection) throws(RequestRejection) {
        let key = draft.url.hostKey
        let hostID: UInt32
        if let known = hostIDs[key] {
            hostID = known
        } else {
            hostID = UInt32(hosts.count)
            hosts.append(key)
            hostIDs[key] = hostID
        }
        let summary = try Self.summary(of: draft, end: end, defaults: defaults, hostID: hostID, reject: reject)
        items.append(summary)
        if let name = draft.fields.upload { uploads.append(UploadEntry(index: draft.index, line: draft.line, name: name)) }
        if let deadline = draft.fields.deadline { itemDeadlines[draft.index] = deadline }
        // Only an item that waits on purpose can outwait its URL; the others start at once.
        if summary.earliestStart != nil || summary.discretionary {
            let given = draft.fields.expires ?? defaults.expires
            if let expiry = given.map({ URLExpiry(date: $0, form: .expiresKey) }) ?? URLExpiry.read(from: draft.url.string) {
                expiryNotes.note(ExpiryNote(index: draft.index, expiry: expiry, earliestStart: summary.earliestStart),
                                 discretionary: summary.discretionary)
            }
        }
    }

    static func summary(of draft: ItemDraft, end: Int, defaults: RequestFields, hostID: UInt32,
                        reject: (Int?, String, String) -> RequestRejection) throws(RequestRejection) -> ItemSummary {
        let own = draft.fields
        guard let length = UInt32(exactly: end - draft.offset), let line = UInt32(exactly: draft.line),
              let index = UInt32(exactly: draft.index) else {
            throw reject(draft.line, "too-large", "an item's lines span more than 4 GiB, or the file more than 4 billion lines")
        }
        return ItemSummary(
            offset: Int64(draft.offset), length: length, line: line, index: index, hostID: hostID,
            checksum: draft.checksum.value,
            earliestStart: own.earliestStart ?? defaults.earliestStart,
            expectedBytes: own.expectedBytes ?? defaults.expectedBytes,
            priority: own.priority ?? defaults.priority ?? .normal,
            discretionary: own.discretionary ?? defaults.discretionary ?? false,
            hasMirrors: !own.mirrors.isEmpty, isUpload: own.upload != nil)
    }
}

/// An upload item of a request file: where its `url` line is and the file it names.
public struct UploadEntry: Sendable, Hashable {
    public let index: Int
    public let line: Int
    public let name: String

    public init(index: Int, line: Int, name: String) {
        self.index = index
        self.line = line
        self.name = name
    }
}

/// One item whose URL has a known expiry and which waits on purpose (an earliest start, or
/// discretionary).
public struct ExpiryNote: Sendable, Hashable {
    public let index: Int
    public let expiry: URLExpiry
    public let earliestStart: Date?
}

/// What intake needs to warn about URLs that expire before their items may start: the items
/// whose `earliest-start` lies after their expiry (how many, and the first), and the
/// discretionary item whose URL expires first (the daemon compares it with its window).
public struct ExpiryNotes: Sendable, Hashable {
    public private(set) var lateStarts = 0
    public private(set) var firstLateStart: ExpiryNote?
    public private(set) var firstDiscretionary: ExpiryNote?

    public init() {}

    mutating func note(_ note: ExpiryNote, discretionary: Bool) {
        if let start = note.earliestStart, start > note.expiry.date {
            lateStarts += 1
            if firstLateStart == nil { firstLateStart = note }
        }
        if discretionary, note.expiry.date < firstDiscretionary?.expiry.date ?? .distantFuture { firstDiscretionary = note }
    }

    public var isEmpty: Bool { firstLateStart == nil && firstDiscretionary == nil }
}
