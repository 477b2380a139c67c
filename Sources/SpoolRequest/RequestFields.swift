import Foundation

/// The keys a request file may use.
enum RequestKey: String, CaseIterable {
    case url, earliestStart = "earliest-start", expectedBytes = "expected-bytes", name, sha256, priority,
         discretionary, group, header, maxBytes = "max-bytes", markers, onExists = "on-exists",
         expires, refreshKey = "refresh-key", credentials, mirror, upload, method, contentType = "content-type",
         maxRate = "max-rate", segments, deadline

    /// Keys that describe a download's result, meaningless for an item that sends a file.
    static let downloadOnly: [RequestKey] = [.name, .sha256, .maxBytes, .expectedBytes, .onExists, .mirror, .segments]

    /// One bit per key, for the "given twice" check without a set per item.
    var bit: UInt32 { 1 << UInt32(Self.allCases.firstIndex(of: self)!) }
}

/// Values of one item (or of the file's defaults) as given so far, validated.
struct RequestFields: Sendable, Hashable {
    var earliestStart: Date?
    var expectedBytes: Int64?
    var name: String?
    var sha256: String?
    var priority: Priority?
    var discretionary: Bool?
    var headers: [RequestHeader] = []
    var maxBytes: Int64?
    var onExists: OnExists?
    /// When the item's URL stops working (`expires:`); else read from the URL (`URLExpiry`).
    var expires: Date?
    /// An opaque token for the refresh hook (`refresh-key:`, such as `bucket/key`).
    var refreshKey: String?
    /// The name of a header file in the daemon's `--credentials-dir` (`credentials:`).
    var credentials: String?
    /// The same resource elsewhere (`mirror:`, repeatable, in order of preference; item only).
    var mirrors: [RequestURL] = []
    /// `max-rate:`, file-level (the builder's, in the defaults only): bytes per second for all
    /// the file's items together. Kept here so a file without it costs its settings nothing.
    var maxRate: Int64?
    /// `upload:`: a file in `outgoing/` to send instead of downloading (item only).
    var upload: String?
    var method: UploadMethod?
    var contentType: String?
    /// The first line of an item's own `method`/`content-type`: refused there when the item
    /// turns out not to upload.
    var uploadOnlyLine: Int?
    /// Connections a large body may use at once (`segments:`; 1: one stream).
    var segments: Int?
    /// `deadline:`: when the item fails `deadline` if it has not ended.
    var deadline: RequestDeadline?
    var seen: UInt32 = 0

    /// Validates `value` for `key` and records it. `group` and `url` are the builder's.
    mutating func set(_ key: RequestKey, _ value: String, line: Int, scope: String,
                      reject: (Int?, String, String) -> RequestRejection) throws(RequestRejection) {
        if key != .header && key != .mirror {
            guard seen & key.bit == 0 else {
                throw reject(line, "duplicate-key", "\(key.rawValue) is given twice for the same \(scope)")
            }
            seen |= key.bit
        }
        if scope == "item" {
            if key == .upload, let other = RequestKey.downloadOnly.first(where: { seen & $0.bit != 0 }) {
                throw reject(line, "upload-conflict", "an upload item takes no \(other.rawValue) (it names what a download publishes)")
            }
            if upload != nil, RequestKey.downloadOnly.contains(key) {
                throw reject(line, "upload-conflict", "an upload item takes no \(key.rawValue) (it names what a download publishes)")
            }
            if key == .method || key == .contentType, uploadOnlyLine == nil { uploadOnlyLine = line }
        }
        switch key {
        case .upload:
            guard scope == "item" else {
                throw reject(line, "item-level-key", "upload names one item's file; give it after that item's url")
            }
            if let why = UploadName.violation(of: value) { throw reject(line, "bad-upload", "upload \(why)") }
            upload = value
        case .method:
            guard let m = UploadMethod(rawValue: value.uppercased()) else {
                throw reject(line, "bad-method", "method must be PUT or POST (it applies to upload items)"
                             + Suggestion.didYouMean(value, among: UploadMethod.allCases.map { $0.rawValue.lowercased() }))
            }
            method = m
        case .contentType:
            guard MediaType.isValid(value) else {
                throw reject(line, "bad-content-type", "content-type must be a media type such as application/json (printable ASCII, at most 256 bytes)")
            }
            contentType = value
        case .earliestStart:
            guard let d = RFC3339.parse(value) else {
                throw reject(line, "bad-time", "earliest-start must be an RFC 3339 time such as 2026-11-23T02:00:00Z")
            }
            earliestStart = d
        case .expires:
            guard let d = RFC3339.parse(value) else {
                throw reject(line, "bad-time", "expires must be an RFC 3339 time such as 2026-11-23T02:00:00Z")
            }
            expires = d
        case .mirror:
            guard scope == "item" else {
                throw reject(line, "item-level-key", "mirror names another source of one item; give it after that item's url")
            }
            guard mirrors.count < Self.maxMirrors else {
                throw reject(line, "too-many-mirrors", "at most \(Self.maxMirrors) mirrors per item")
            }
            do { mirrors.append(try RequestURL(validating: value)) } catch {
                throw reject(line, error.rule, "mirror: \(error.reason)")
            }
        case .credentials:
            if let why = PlainName.violation(of: value) { throw reject(line, "bad-credentials", "credentials \(why)") }
            credentials = value
        case .refreshKey:
            guard !value.isEmpty, value.utf8.count <= 1024, !value.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
                throw reject(line, "bad-refresh-key", "refresh-key must be 1 to 1024 bytes without control characters")
            }
            refreshKey = value
        case .expectedBytes, .maxBytes:
            guard let n = ByteCount.parse(value) else {
                throw reject(line, "bad-number", "\(key.rawValue) must be a non-negative whole number of bytes, optionally with k, M, G or T")
            }
            if key == .expectedBytes { expectedBytes = n } else { maxBytes = n }
        case .segments:
            guard let n = Int(value), (1...Self.maxSegments).contains(n) else {
                throw reject(line, "bad-segments", "segments must be a whole number from 1 to \(Self.maxSegments) (1: one connection)")
            }
            segments = n
        case .name:
            if let why = PlainName.violation(of: value) { throw reject(line, "bad-name", "name \(why)") }
            name = value
        case .sha256:
            guard value.utf8.count == 64, value.allSatisfy(\.isHexDigit) else {
                throw reject(line, "bad-sha256", "sha256 must be 64 hexadecimal digits")
            }
            sha256 = value.lowercased()
        case .priority:
            guard let p = Priority(rawValue: value.lowercased()) else {
                throw reject(line, "bad-priority", "priority must be high, normal or low"
                             + Suggestion.didYouMean(value, among: Priority.allCases.map(\.rawValue)))
            }
            priority = p
        case .discretionary:
            switch value.lowercased() {
            case "yes", "true", "1": discretionary = true
            case "no", "false", "0": discretionary = false
            default: throw reject(line, "bad-boolean", "discretionary must be yes or no")
            }
        case .header:
            let header = try Self.parseHeader(value, line: line, reject: reject)
            headers.removeAll { $0.name.lowercased() == header.name.lowercased() }
            headers.append(header)
        case .onExists:
            guard let v = OnExists(rawValue: value.lowercased()) else {
                throw reject(line, "bad-on-exists", "on-exists must be keep-both, replace or skip-unchanged"
                             + Suggestion.didYouMean(value, among: OnExists.allCases.map(\.rawValue)))
            }
            onExists = v
        case .deadline:
            guard let d = RequestDeadline(parsing: value) else {
                throw reject(line, "bad-deadline", "deadline must be an RFC 3339 time such as 2026-11-23T06:00:00Z, "
                             + "or a time from the claim such as 90m, 6h or 2d")
            }
            deadline = d
        case .url, .group, .markers, .maxRate:
            break
        }
    }

    static let maxMirrors = 16
    /// One `header:` (its `Name: value`, as sent) at most 8 KiB, and an item's headers (its own
    /// over the file's defaults) at most 64 KiB together, counted the same way. Why: a request file
    /// comes from another program, and libcurl fails a transfer with a header beyond what servers
    /// take (`curl error 27` for a 10 MB one, after the item was queued and started); most servers
    /// refuse a header line past 8 KiB (nginx's `large_client_header_buffers`, Apache's
    /// `LimitRequestFieldSize`) and a request's header block past a few tens of KiB. Refused at
    /// the line, before any item of the file is queued.
    public static let maxHeaderBytes = 8 << 10
    public static let maxHeadersBytes = 64 << 10

    /// The bytes `headers` take as sent (`Name: value` each, line endings not counted).
    static func headerBytes(_ headers: [RequestHeader]) -> Int {
        headers.reduce(0) { $0 + $1.name.utf8.count + 2 + $1.value.utf8.count }
    }
    /// More connections than any host's `--per-host` would allow is a mistake, not a wish.
    static let maxSegments = 64

    static func parseHeader(_ value: String, line: Int,
                            reject: (Int?, String, String) -> RequestRejection) throws(RequestRejection) -> RequestHeader {
        guard value.utf8.count <= maxHeaderBytes else {
            throw reject(line, "header-too-large", "a header is at most \(maxHeaderBytes) bytes ('Name: value'); this one has \(value.utf8.count)")
        }
        guard let colon = value.firstIndex(of: ":") else {
            throw reject(line, "bad-header", "header must look like 'Name: value'")
        }
        let name = String(value[..<colon].trimmingSpaces())
        let headerValue = String(value[value.index(after: colon)...].trimmingSpaces())
        let tokenChars = Set("!#$%&'*+-.^_`|~".utf8)
        guard !name.isEmpty, name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A)
            || ($0 >= 0x61 && $0 <= 0x7A) || tokenChars.contains($0) }) else {
            throw reject(line, "bad-header", "the header name must be a non-empty HTTP token")
        }
        guard !headerValue.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else {
            throw reject(line, "bad-header", "the value of header \(name) contains CR, LF or NUL")
        }
        let lower = name.lowercased()
        guard lower != "range" && lower != "if-range" else {
            throw reject(line, "bad-header", "header \(name) is set by the daemon (it resumes with ranges)")
        }
        return RequestHeader(name: name, value: headerValue)
    }

    /// The item's own values over the defaults: its headers replace same-named default ones.
    func headers(over defaults: RequestFields) -> [RequestHeader] {
        guard !headers.isEmpty else { return defaults.headers }
        var merged = defaults.headers
        for h in headers {
            merged.removeAll { $0.name.lowercased() == h.name.lowercased() }
            merged.append(h)
        }
        return merged
    }
}

/// "Did you mean" hints for a mistyped key or value: the closest known word within two edits.
enum Suggestion {
    /// `"; did you mean 'priority'?"`, or `""` when nothing is close. Quotes only a known word,
    /// never the text from the file.
    static func didYouMean(_ given: String, among known: [String]) -> String {
        let g = Array(given.lowercased().utf8.prefix(64))
        var best: (word: String, distance: Int)?
        for word in known {
            let d = distance(g, Array(word.utf8))
            if d <= 2, d < (best?.distance ?? .max) { best = (word, d) }
        }
        return best.map { "; did you mean '\($0.word)'?" } ?? ""
    }

    /// Levenshtein distance with adjacent transpositions counted as one edit.
    static func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], before[j - 2] + 1)
                }
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
