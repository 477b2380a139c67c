import Foundation

/// `final/NAME.done`: the marker whose presence means `final/NAME` is complete and final.
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
    /// Seconds the item waited because its host could not be reached (no attempts used).
    public var outageSeconds: Int?
    /// SHA-256 (hex) of the URL's query, which `url` leaves out: a signed URL matched, not kept.
    public var urlQuerySha256: String?
    /// With mirrors: the source that served it (0: its `url`, 1: its first mirror, …), `url` its URL;
    /// `"store"` when it was published from the content store without a request.
    public var source: ItemSource?
    /// Connections the body came over, when more than one (a segmented transfer).
    public var connections: Int?
    /// The request's owner (the name of the user whose file the request was, at claim; its uid
    /// as text when the account database has no name), and its uid.
    public var owner: String?
    public var ownerUID: Int?

    public init(request: String, group: String, index: Int, url: String, finalURL: String?, name: String,
                bytes: Int64, sha256: String, httpStatus: Int, etag: String?, lastModified: String?,
                contentType: String?, startedAt: String, finishedAt: String, attempts: Int,
                outageSeconds: Int? = nil, urlQuerySha256: String? = nil, source: ItemSource? = nil) {
        self.source = source; self.outageSeconds = outageSeconds; self.urlQuerySha256 = urlQuerySha256
        self.request = request; self.group = group; self.index = index; self.url = url
        self.finalURL = finalURL; self.name = name; self.bytes = bytes; self.sha256 = sha256
        self.httpStatus = httpStatus; self.etag = etag; self.lastModified = lastModified
        self.contentType = contentType; self.startedAt = startedAt; self.finishedAt = finishedAt
        self.attempts = attempts
    }
}

/// Where a published body came from: the index of the source that served it (0: the item's
/// `url`, 1: its first mirror, …), or the content store. Written as a number or `"store"`.
public enum ItemSource: Codable, Sendable, Hashable, ExpressibleByIntegerLiteral {
    case index(Int)
    case store

    public init(integerLiteral value: Int) { self = .index(value) }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let i = try? container.decode(Int.self) { self = .index(i); return }
        let text = try container.decode(String.self)
        guard text == "store" else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "source is a number or \"store\", got '\(text)'")
        }
        self = .store
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .index(let i): try container.encode(i)
        case .store: try container.encode("store")
        }
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
    /// The URL after redirects, when it differs from `url`.
    public var finalURL: String?
    /// Seconds the item waited because its host could not be reached (no attempts used).
    public var outageSeconds: Int?
    /// `deadline` and `cancelled`: what the item waited on or last failed with.
    public var cause: FailureCause?

    public init(index: Int, url: String, name: String, code: String, message: String, attempts: Int,
                httpStatus: Int? = nil, curlCode: Int? = nil, curlError: String? = nil,
                finalURL: String? = nil, outageSeconds: Int? = nil) {
        self.finalURL = finalURL
        self.outageSeconds = outageSeconds
        self.index = index; self.url = url; self.name = name; self.code = code; self.message = message
        self.attempts = attempts; self.httpStatus = httpStatus; self.curlCode = curlCode; self.curlError = curlError
    }
}

/// One item's line in the group marker.
public struct GroupItem: Codable, Sendable, Hashable {
    public var index: Int
    public var url: String
    /// `published`, `failed`, or `unchanged` (`on-exists: skip-unchanged`: a 304 confirmed the
    /// file already published under `file`; nothing new was published).
    public var outcome: String
    /// The published file's name in the final folder (may carry a collision suffix).
    public var file: String?
    public var marker: String?
    public var code: String?
    public var message: String?
    /// A published file's facts, given only under `markers: group` (no per-file marker carries
    /// them there); absent, and so absent from the JSON, with per-file markers.
    public var bytes: Int64?
    public var sha256: String?
    public var finalURL: String?
    public var httpStatus: Int?
    /// As in `ItemMarker`.
    public var urlQuerySha256: String?
    /// A failed item's cause, as in `ItemFailure`.
    public var cause: FailureCause?

    public init(index: Int, url: String, outcome: String, file: String? = nil, marker: String? = nil,
                code: String? = nil, message: String? = nil, cause: FailureCause? = nil) {
        self.index = index; self.url = url; self.outcome = outcome; self.file = file
        self.marker = marker; self.code = code; self.message = message; self.cause = cause
    }

    /// Copies a published file's facts from what would have been its marker.
    public mutating func describe(_ marker: ItemMarker) {
        bytes = marker.bytes
        sha256 = marker.sha256
        finalURL = marker.finalURL
        httpStatus = marker.httpStatus
    }
}

/// `final/GROUP.group.done`: written once, when every item of a request file has ended.
public struct GroupMarker: Codable, Sendable, Hashable {
    public var group: String
    public var request: String
    public var finishedAt: String
    public var published: Int
    public var failed: Int
    /// Items a 304 confirmed as already published (absent when none).
    public var unchanged: Int?
    public var items: [GroupItem]
    /// The request's owner (the name of the user whose file the request was, at claim; its uid
    /// as text when the account database has no name), and its uid.
    public var owner: String?
    public var ownerUID: Int?
    /// With more failed items than `SpoolStore.listedFailuresLimit`: `items` lists only the
    /// others, `endings` counts the failed ones by code and message, and `itemsFile` (beside the
    /// marker in the final folder) lists them, one `ItemFailure` a line.
    public var endings: [EndingCount]?
    public var itemsFile: String?

    public init(group: String, request: String, finishedAt: String, items: [GroupItem]) {
        self.group = group; self.request = request; self.finishedAt = finishedAt; self.items = items
        published = items.filter { $0.outcome == "published" }.count
        failed = items.filter { $0.outcome == "failed" }.count
        let unchanged = items.filter { $0.outcome == "unchanged" }.count
        self.unchanged = unchanged > 0 ? unchanged : nil
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
    /// The request's owner (the name of the user whose file the request was, at claim; its uid
    /// as text when the account database has no name), and its uid.
    public var owner: String?
    public var ownerUID: Int?
    /// With more failed items than `SpoolStore.listedFailuresLimit`, in place of `items`: the
    /// failed items counted by code and message, and the file beside this one (`R.error.items.jsonl`)
    /// that lists them, one `ItemFailure` a line.
    public var endings: [EndingCount]?
    public var itemsFile: String?

    public init(request: String, code: String, message: String, line: Int? = nil, items: [ItemFailure]? = nil) {
        self.request = request; self.code = code; self.message = message; self.line = line; self.items = items
    }
}

/// `staging/B.state`: what a restart needs to know about an item (the README's state table).
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
    /// Phase running: how many of the part's first bytes were made durable (`fdatasync`) before
    /// this state was written, and the boot it was written in (`BootID`). Within that boot a
    /// restart may resume from the whole part: a killed process loses no write it made. After a
    /// power cut only the synced prefix holds — past it the file may have its new size but
    /// blocks that never reached the disk (zeros), which a resume would publish as data.
    public var syncedBytes: Int64?
    public var bootID: String?
    /// The refresh hook's URL in place of the request's, so that a restart resumes with it.
    public var refreshedURL: String?
    /// Phase running: the body is being fetched as this many ranges at once (a segmented
    /// transfer, running or stopped with its ranges kept). Its part then holds bytes past the
    /// in-order prefix, with holes between them: a restart keeps only what `ranges` vouches for.
    public var segments: Int?
    /// Phase running, segmented: `[from, done, to, durable]` for each range after the in-order
    /// prefix (`bytes`), in order; `[from, done)` was in the file when the state was written
    /// (trusted in the boot it was written in: a killed process loses no write it made), and
    /// `[from, durable)` had been synced (trusted after a power cut too). States written before
    /// `durable` existed have three numbers: their ranges hold only within their boot.
    public var ranges: [[Int64]]?

    public init(request: String, index: Int, url: String, phase: Phase, inode: UInt64? = nil,
                etag: String? = nil, lastModified: String? = nil, bytes: Int64 = 0, attempts: Int = 0,
                startedAt: String? = nil, marker: ItemMarker? = nil, finalName: String? = nil,
                failure: ItemFailure? = nil, syncedBytes: Int64? = nil, bootID: String? = nil,
                refreshedURL: String? = nil, segments: Int? = nil, ranges: [[Int64]]? = nil) {
        self.refreshedURL = refreshedURL
        self.segments = segments
        self.ranges = ranges
        self.request = request; self.index = index; self.url = url; self.phase = phase; self.inode = inode
        self.etag = etag; self.lastModified = lastModified; self.bytes = bytes; self.attempts = attempts
        self.startedAt = startedAt; self.marker = marker; self.finalName = finalName; self.failure = failure
        self.syncedBytes = syncedBytes; self.bootID = bootID
    }
}
