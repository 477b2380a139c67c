import Foundation

/// One line of a request file, classified.
enum RequestLine {
    case skip
    case url(String)
    case key(RequestKey, String)

    /// Validates the line's UTF-8 and splits it into a URL or a known `key: value`.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, number: Int,
                      reject: (Int?, String, String) -> RequestRejection) throws(RequestRejection) -> RequestLine {
        var start = 0
        var end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        let trimmed = UnsafeBufferPointer(rebasing: bytes[start..<end])
        // Spaces and tabs are ASCII, so validating the trimmed part validates the whole line.
        guard let text = String(validating: trimmed, as: UTF8.self) else {
            throw reject(number, "not-utf8", "the request file is not valid UTF-8")
        }
        if trimmed.isEmpty || trimmed[0] == 0x23 { return .skip }    // '#'
        if looksLikeURL(trimmed) { return .url(text) }
        guard let colon = trimmed.firstIndex(of: 0x3A) else {
            throw reject(number, "malformed-line", "expected 'key: value' or a URL")
        }
        let utf8 = text.utf8
        let colonIndex = utf8.index(utf8.startIndex, offsetBy: colon)
        let key = text[..<colonIndex].trimmingSpaces().lowercased()
        let value = String(text[utf8.index(after: colonIndex)...].trimmingSpaces())
        guard let known = RequestKey(rawValue: key) else {
            let shown = key.count <= 40 && key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") })
                ? "'\(key)'" : "this key"
            let all = RequestKey.allCases.map(\.rawValue)
            throw reject(number, "unknown-key", "unknown key \(shown)\(Suggestion.didYouMean(key, among: all)); known keys: \(all.joined(separator: ", "))")
        }
        return .key(known, value)
    }

    /// `scheme://…`: a bare URL line (so `ftp://x` is refused for its scheme rather than read
    /// as a key, and `http://h/x some words` for the text after its URL, not as a key `http`).
    static func looksLikeURL(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = s.first, (first | 0x20) >= 0x61 && (first | 0x20) <= 0x7A, s.count >= 3 else { return false }
        var sep = -1
        for i in 0..<(s.count - 2) where s[i] == 0x3A && s[i + 1] == 0x2F && s[i + 2] == 0x2F { sep = i; break }
        guard sep > 0 else { return false }
        for i in 0..<sep {
            let b = s[i], l = b | 0x20
            guard (l >= 0x61 && l <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2B || b == 0x2D || b == 0x2E else { return false }
        }
        return true
    }
}

/// An item whose `url` line has been read, with the keys given for it so far.
struct ItemDraft {
    let url: RequestURL
    /// 0-based position in the file.
    let index: Int
    /// 1-based line of its `url`.
    let line: Int
    /// File offset of its `url` line's first byte.
    let offset: Int
    var fields = RequestFields()
    /// Of the item's lines, to notice a slice that changed between indexing and re-reading.
    var checksum = LineChecksum()
}

/// FNV-1a over the lines' bytes (without their line endings), 32 bits: a cheap fingerprint,
/// not a defence against an attacker (who could rewrite the file whole anyway).
struct LineChecksum: Hashable {
    private(set) var value: UInt32 = 0x811C_9DC5

    mutating func add(_ bytes: UnsafeBufferPointer<UInt8>) {
        var h = value
        for b in bytes { h = (h ^ UInt32(b)) &* 0x0100_0193 }
        value = (h ^ 0x0A) &* 0x0100_0193
    }
}

/// Receives each item once all its lines have been read. The builder validates; a sink keeps
/// what its caller needs (a whole `RequestItem`, or a compact `ItemSummary`).
protocol RequestItemSink {
    /// - Parameter end: the file offset just past the item's last line (where the next item
    ///   starts, or the end of the file).
    mutating func add(_ draft: ItemDraft, end: Int, defaults: RequestFields,
                      reject: (Int?, String, String) -> RequestRejection) throws(RequestRejection)
}

/// The request file's grammar as a state machine fed one line at a time: file-level keys and
/// defaults before the first `url`, then items. Every rule is checked here, so every way of
/// reading a file (whole, indexed, one item again) accepts and rejects exactly the same files
/// with the same lines.
struct RequestBuilder<Sink: RequestItemSink> {
    let fileName: String
    let maxItems: Int
    var sink: Sink
    var defaults = RequestFields()
    var group: String?
    var markers: MarkerMode?
    var current: ItemDraft?
    /// Items closed so far (the next item's index).
    var closed: Int
    /// When set, the lines are one item's slice: the first thing must be a `url` and there
    /// may be no other; the defaults come from the index.
    let singleItem: Bool
    /// The `upload:` names of the items so far: one file is sent by one item only.
    var uploads: [String: Int] = [:]

    init(fileName: String, maxItems: Int, sink: Sink) {
        self.fileName = fileName
        self.maxItems = maxItems
        self.sink = sink
        self.closed = 0
        self.singleItem = false
    }

    /// A builder for re-reading one item's lines with the file's defaults.
    init(fileName: String, item index: Int, defaults: RequestFields, sink: Sink) {
        self.fileName = fileName
        self.maxItems = .max
        self.sink = sink
        self.defaults = defaults
        self.closed = index
        self.singleItem = true
    }

    func reject(_ line: Int?, _ rule: String, _ message: String) -> RequestRejection {
        RequestRejection(file: fileName, line: line, rule: rule, message: message)
    }

    mutating func take(_ bytes: UnsafeBufferPointer<UInt8>, number: Int, offset: Int) throws(RequestRejection) {
        let fileName = self.fileName
        let reject = { (l: Int?, r: String, m: String) in RequestRejection(file: fileName, line: l, rule: r, message: m) }
        let line = try RequestLine.parse(bytes, number: number, reject: reject)
        defer { if current != nil { current!.checksum.add(bytes) } }
        switch line {
        case .skip:
            return
        case .url(let text), .key(.url, let text):
            try startItem(url: text, line: number, offset: offset)
        case .key(.group, let value):
            guard current == nil && closed == 0 else {
                throw reject(number, "file-level-key", "group applies to the whole file; give it before the first url")
            }
            guard group == nil else { throw reject(number, "duplicate-key", "group is given twice") }
            if let why = PlainName.violation(of: value) { throw reject(number, "bad-group", "group \(why)") }
            group = value
        case .key(.markers, let value):
            guard current == nil && closed == 0 else {
                throw reject(number, "file-level-key", "markers applies to the whole file; give it before the first url")
            }
            guard markers == nil else { throw reject(number, "duplicate-key", "markers is given twice") }
            guard let mode = MarkerMode(rawValue: value.lowercased()) else {
                throw reject(number, "bad-markers", "markers must be item or group"
                             + Suggestion.didYouMean(value, among: MarkerMode.allCases.map(\.rawValue)))
            }
            markers = mode
        case .key(.maxRate, let value):
            guard current == nil && closed == 0 else {
                throw reject(number, "file-level-key", "max-rate applies to the whole file; give it before the first url")
            }
            guard defaults.maxRate == nil else { throw reject(number, "duplicate-key", "max-rate is given twice") }
            guard let rate = ByteCount.parse(value), rate > 0 else {
                throw reject(number, "bad-number", "max-rate must be a positive number of bytes per second, optionally with k, M, G or T, got '\(value)'")
            }
            defaults.maxRate = rate
        case .key(let key, let value):
            if current != nil {
                try current!.fields.set(key, value, line: number, scope: "item", reject: reject)
            } else {
                if singleItem { throw reject(number, "changed-on-disk", "the item's lines no longer start with its url") }
                try defaults.set(key, value, line: number, scope: "defaults", reject: reject)
            }
            if key == .header { try checkHeadersTotal(line: number) }
        }
    }

    /// The headers an item would send (its own over the defaults; the defaults alone before the
    /// first url) stay within `RequestFields.maxHeadersBytes`: else the file is refused at the
    /// `header:` line that went past it.
    func checkHeadersTotal(line: Int) throws(RequestRejection) {
        let headers = current.map { $0.fields.headers(over: defaults) } ?? defaults.headers
        let total = RequestFields.headerBytes(headers)
        guard total <= RequestFields.maxHeadersBytes else {
            throw reject(line, "headers-too-large", "an item's headers are at most \(RequestFields.maxHeadersBytes) bytes together "
                         + "('Name: value' each, the file's default headers included); with this one they are \(total)")
        }
    }

    mutating func startItem(url text: String, line: Int, offset: Int) throws(RequestRejection) {
        if singleItem && current != nil {
            throw reject(line, "changed-on-disk", "another url appeared within the item's lines")
        }
        try closeItem(end: offset)
        guard closed < maxItems else {
            throw reject(line, "too-many-items", "more than \(maxItems) items in one request file")
        }
        do {
            current = ItemDraft(url: try RequestURL(validating: text), index: closed, line: line, offset: offset)
        } catch {
            if let trailing = RequestURL.trailingText(of: text) {
                throw reject(line, error.rule, "the URL line has text after the URL ('\(trailing)'); a URL line holds the URL alone "
                                 + "(a space inside a URL is written %20; a comment goes on its own line, starting with #)")
            }
            throw reject(line, error.rule, "url: \(error.reason)")
        }
    }

    mutating func closeItem(end: Int) throws(RequestRejection) {
        guard let draft = current else { return }
        current = nil
        if let name = draft.fields.upload {
            if !singleItem, let first = uploads.updateValue(draft.line, forKey: name) {
                throw reject(draft.line, "duplicate-upload", "upload \(name) is already sent by the item on line \(first)")
            }
        } else if let line = draft.fields.uploadOnlyLine {
            throw reject(line, "upload-only-key", "method and content-type apply to upload items; this item has no upload")
        }
        let fileName = self.fileName
        try sink.add(draft, end: end, defaults: defaults,
                     reject: { RequestRejection(file: fileName, line: $0, rule: $1, message: $2) })
        closed += 1
    }

    /// Closes the last item; `end` is the file's length.
    mutating func finish(end: Int) throws(RequestRejection) {
        try closeItem(end: end)
        guard closed > 0 else {
            throw reject(nil, singleItem ? "changed-on-disk" : "no-items",
                         singleItem ? "the item's lines hold no url any more" : "the request file has no url")
        }
    }

    var groupName: String { group ?? PlainName.sanitise(fileName) }
}

/// Keeps whole items (the in-memory `parse`, and one item re-read from its slice).
struct FullItemSink: RequestItemSink {
    var items: [RequestItem] = []

    mutating func add(_ draft: ItemDraft, end: Int, defaults: RequestFields,
                      reject: (Int?, String, String) -> RequestRejection) throws(RequestRejection) {
        items.append(Self.resolve(draft, defaults: defaults))
    }

    static func resolve(_ draft: ItemDraft, defaults: RequestFields) -> RequestItem {
        let own = draft.fields
        return RequestItem(
            index: draft.index, line: draft.line, url: draft.url,
            name: own.name ?? defaults.name ?? PlainName.derived(from: draft.url),
            earliestStart: own.earliestStart ?? defaults.earliestStart,
            expectedBytes: own.expectedBytes ?? defaults.expectedBytes,
            sha256: own.sha256 ?? defaults.sha256,
            priority: own.priority ?? defaults.priority ?? .normal,
            discretionary: own.discretionary ?? defaults.discretionary ?? false,
            headers: own.headers(over: defaults),
            maxBytes: own.maxBytes ?? defaults.maxBytes,
            onExists: own.onExists ?? defaults.onExists ?? .keepBoth,
            expires: own.expires ?? defaults.expires,
            refreshKey: own.refreshKey ?? defaults.refreshKey,
            credentials: own.credentials ?? defaults.credentials,
            mirrors: own.mirrors,
            upload: own.upload.map {
                Upload(name: $0, method: own.method ?? defaults.method ?? .put,
                       contentType: own.contentType ?? defaults.contentType ?? Upload.defaultContentType)
            },
            segments: own.segments ?? defaults.segments,
            deadline: own.deadline ?? defaults.deadline)
    }
}

/// Keeps the one item of a re-read slice and its lines' checksum.
struct ChecksummedItemSink: RequestItemSink {
    var item: RequestItem?
    var checksum: UInt32 = 0

    mutating func add(_ draft: ItemDraft, end: Int, defaults: RequestFields,
                      reject: (Int?, String, String) -> RequestRejection) throws(RequestRejection) {
        item = FullItemSink.resolve(draft, defaults: defaults)
        checksum = draft.checksum.value
    }
}
