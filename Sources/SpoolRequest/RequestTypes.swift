import Foundation

/// Urgency of an item when transfer slots are scarce. `low < normal < high`.
public enum Priority: String, Sendable, Hashable, Comparable, CaseIterable {
    case low, normal, high
    private var rank: Int { self == .low ? 0 : self == .normal ? 1 : 2 }
    public static func < (a: Priority, b: Priority) -> Bool { a.rank < b.rank }
}

/// Which done markers a request's files get (`markers:`, file-level).
public enum MarkerMode: String, Sendable, Hashable, CaseIterable {
    /// `NAME.done` after each published file, then the group marker (the default).
    case item
    /// No per-file markers: the group marker, published last, lists every file — one
    /// `_SUCCESS`-style signal for consumers that want the whole batch.
    case group
}

/// What to do when an item's final name is already taken (`on-exists:`, a default before the
/// first url or per item).
public enum OnExists: String, Sendable, Hashable, CaseIterable {
    /// Publish under a free `-N` name beside the old file (the default).
    case keepBoth = "keep-both"
    /// Atomically replace the old file and its marker.
    case replace
    /// Ask conditionally with the previous marker's validators; an unchanged resource is not
    /// published again.
    case skipUnchanged = "skip-unchanged"
}

/// One extra request header from a `header:` line.
public struct RequestHeader: Sendable, Hashable {
    public let name: String
    public let value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Authorization, Proxy-Authorization, Cookie: their values are never logged or written.
    public var isSecret: Bool {
        let n = name.lowercased()
        return n == "authorization" || n == "proxy-authorization" || n == "cookie"
    }

    /// `Name: value`, as sent.
    public var line: String { "\(name): \(value)" }

    /// A `Name: value` line checked as a request's `header:` is; the error says what is wrong
    /// (never the value).
    public static func parse(_ line: String) -> Result<RequestHeader, RequestRejection> {
        do {
            return .success(try RequestFields.parseHeader(line, line: 0) {
                RequestRejection(file: "", line: $0, rule: $1, message: $2)
            })
        } catch {
            return .failure(error)
        }
    }
}

/// One download of a request file.
public struct RequestItem: Sendable, Hashable {
    /// 0-based position in the file.
    public let index: Int
    /// 1-based line of its `url`.
    public let line: Int
    public let url: RequestURL
    /// Validated `name`, or the name derived from the URL and sanitised.
    public let name: String
    public let earliestStart: Date?
    public let expectedBytes: Int64?
    /// Lowercase hex.
    public let sha256: String?
    public let priority: Priority
    public let discretionary: Bool
    public let headers: [RequestHeader]
    public let maxBytes: Int64?
    /// The item's own `on-exists`, else the file's, else `keep-both`.
    public let onExists: OnExists
    /// The item's own `expires`, else the file's default.
    public let expires: Date?
    /// The item's own `refresh-key`, else the file's default: handed to the refresh hook.
    public let refreshKey: String?
    /// The item's own `credentials`, else the file's default: a file in `--credentials-dir`.
    public let credentials: String?
    /// Other sources of the same resource (`mirror:`), in order of preference.
    public let mirrors: [RequestURL]
    /// What the item sends (`upload:`), or nil for a download.
    public let upload: Upload?
    /// Connections its body may use at once when large (`segments:`); nil: `--max-segments`.
    public let segments: Int?
    /// The item's own `deadline`, else the file's default; nil: the daemon's `--deadline`.
    public var deadline: RequestDeadline? = nil

    /// The item's sources: its `url`, then its mirrors (source 0, 1, …).
    public var sources: [RequestURL] { [url] + mirrors }

    /// When the URL stops working: `expires:` when given, else what the URL's query says
    /// (`URLExpiry`); nil when neither tells.
    public var expiry: URLExpiry? {
        expires.map { URLExpiry(date: $0, form: .expiresKey) } ?? URLExpiry.read(from: url.string)
    }
}

/// A parsed request file: one group of items.
public struct RequestFile: Sendable, Hashable {
    /// The request file's name (R).
    public let fileName: String
    public let group: String
    public let items: [RequestItem]
    /// `markers:` (default `item`).
    public let markers: MarkerMode
    /// `on-exists:` given before the first url (default `keep-both`); each item's resolved
    /// value is `RequestItem.onExists`.
    public let onExists: OnExists
}

/// Bounds on what a request file may contain. The defaults (64 MiB, 1,000,000 items) take a
/// plain list of any practical size — about 700,000 typical URLs fit in 64 MiB — while still
/// bounding what one hostile file can make the daemon read and index.
public struct ParseLimits: Sendable, Hashable {
    public static let defaultMaxBytes = 64 << 20
    public static let defaultMaxItems = 1_000_000
    public var maxBytes: Int
    public var maxItems: Int
    public init(maxBytes: Int = ParseLimits.defaultMaxBytes, maxItems: Int = ParseLimits.defaultMaxItems) {
        self.maxBytes = maxBytes
        self.maxItems = maxItems
    }
}

/// Why a request file was refused. `rule` is a stable kebab-case code ("unknown-key",
/// "bad-sha256", …); `message` names the key and what is wrong, never a header's value.
public struct RequestRejection: Error, Sendable, Hashable, CustomStringConvertible {
    public let file: String
    public let line: Int?
    public let rule: String
    public let message: String

    public init(file: String, line: Int?, rule: String, message: String) {
        self.file = file
        self.line = line
        self.rule = rule
        self.message = message
    }

    /// `R:12: bad-sha256: sha256 must be 64 hexadecimal digits`
    public var description: String {
        "\(file)\(line.map { ":\($0)" } ?? ""): \(rule): \(message)"
    }
}
