import Foundation

/// `done/NAME.done`: the marker whose presence means `done/NAME` is complete and final.
public struct ItemMarker: Codable, Sendable, Hashable {
    public var request: String
    public var group: String
    public var index: Int
    public var url: String
    public var finalURL: String?
    public var name: String
    public var bytes: Int64
    public var sha256: String
    public var httpStatus: Int
    public var etag: String?
    public var lastModified: String?
    public var contentType: String?
    public var startedAt: String
    public var finishedAt: String
    public var attempts: Int

    public init(request: String, group: String, index: Int, url: String, finalURL: String?, name: String,
                bytes: Int64, sha256: String, httpStatus: Int, etag: String?, lastModified: String?,
                contentType: String?, startedAt: String, finishedAt: String, attempts: Int) {
        self.request = request; self.group = group; self.index = index; self.url = url
        self.finalURL = finalURL; self.name = name; self.bytes = bytes; self.sha256 = sha256
        self.httpStatus = httpStatus; self.etag = etag; self.lastModified = lastModified
        self.contentType = contentType; self.startedAt = startedAt; self.finishedAt = finishedAt
        self.attempts = attempts
    }
}

/// Why one item failed for good: a line of `R.error` and of the group marker.
public struct ItemFailure: Codable, Sendable, Hashable {
    public var index: Int
    public var url: String
    public var name: String
    /// Stable reason code: `http-status`, `sha256-mismatch`, `too-large`, `connect`, `tls`, …
    public var code: String
    public var message: String
    public var attempts: Int
    public var httpStatus: Int?
    public var curlCode: Int?
    public var curlError: String?

    public init(index: Int, url: String, name: String, code: String, message: String, attempts: Int,
                httpStatus: Int? = nil, curlCode: Int? = nil, curlError: String? = nil) {
        self.index = index; self.url = url; self.name = name; self.code = code; self.message = message
        self.attempts = attempts; self.httpStatus = httpStatus; self.curlCode = curlCode; self.curlError = curlError
    }
}

/// One item's line in the group marker.
public struct GroupItem: Codable, Sendable, Hashable {
    public var index: Int
    public var url: String
    /// `published` or `failed`.
    public var outcome: String
    /// The published file's name in the final folder (may carry a collision suffix).
    public var file: String?
    public var marker: String?
    public var code: String?
    public var message: String?

    public init(index: Int, url: String, outcome: String, file: String? = nil, marker: String? = nil,
                code: String? = nil, message: String? = nil) {
        self.index = index; self.url = url; self.outcome = outcome; self.file = file
        self.marker = marker; self.code = code; self.message = message
    }
}

/// `done/GROUP.group.done`: written once, when every item of a request file has ended.
public struct GroupMarker: Codable, Sendable, Hashable {
    public var group: String
    public var request: String
    public var finishedAt: String
    public var published: Int
    public var failed: Int
    public var items: [GroupItem]

    public init(group: String, request: String, finishedAt: String, items: [GroupItem]) {
        self.group = group; self.request = request; self.finishedAt = finishedAt; self.items = items
        published = items.filter { $0.outcome == "published" }.count
        failed = items.count - published
    }
}

/// `failed/R.error` and `rejected/R.error`.
public struct ErrorRecord: Codable, Sendable, Hashable {
    public var request: String
    /// Stable code: the parser's rule (`unknown-key`, `bad-url`, …), `not-regular-file`, or `items-failed`.
    public var code: String
    public var message: String
    public var line: Int?
    public var items: [ItemFailure]?

    public init(request: String, code: String, message: String, line: Int? = nil, items: [ItemFailure]? = nil) {
        self.request = request; self.code = code; self.message = message; self.line = line; self.items = items
    }
}

/// `staging/B.state`: what a restart needs to know about an item (DESIGN.md §3 state table).
public struct ItemState: Codable, Sendable, Hashable {
    public enum Phase: String, Codable, Sendable {
        /// `B.part` is being written.
        case running
        /// `B.part` is complete and verified; `marker` holds its facts. Publish (again) from it.
        case ready
        /// Renamed into the final folder as `finalName` with its marker.
        case published
        /// Failed for good; `failure` says why.
        case failed
    }
    public var request: String
    public var index: Int
    public var url: String
    public var phase: Phase
    /// Inode of `B.part`; finds the published file after a crash between data and marker rename.
    public var inode: UInt64?
    /// Resume validators and progress.
    public var etag: String?
    public var lastModified: String?
    public var bytes: Int64
    public var attempts: Int
    public var startedAt: String?
    public var marker: ItemMarker?
    public var finalName: String?
    public var failure: ItemFailure?

    public init(request: String, index: Int, url: String, phase: Phase, inode: UInt64? = nil,
                etag: String? = nil, lastModified: String? = nil, bytes: Int64 = 0, attempts: Int = 0,
                startedAt: String? = nil, marker: ItemMarker? = nil, finalName: String? = nil,
                failure: ItemFailure? = nil) {
        self.request = request; self.index = index; self.url = url; self.phase = phase; self.inode = inode
        self.etag = etag; self.lastModified = lastModified; self.bytes = bytes; self.attempts = attempts
        self.startedAt = startedAt; self.marker = marker; self.finalName = finalName; self.failure = failure
    }
}

/// JSON as the spool writes it: sorted keys, no escaped slashes, one trailing newline.
public enum SpoolJSON {
    public static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding these plain records cannot fail.
        var bytes = [UInt8]((try? encoder.encode(value)) ?? Data("{}".utf8))
        bytes.append(0x0A)
        return bytes
    }

    public static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) -> T? {
        try? JSONDecoder().decode(type, from: Data(bytes))
    }
}
