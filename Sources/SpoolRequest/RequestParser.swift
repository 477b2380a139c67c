import Foundation

/// Parses and validates the bytes of a request file (README "Request files"). Pure: no I/O.
///
/// Errors name the file, the line and the rule; they quote at most a key, never a value taken
/// from the file (it came from another program and may hold secrets).
public enum RequestParser {
    public static func parse(fileName: String, bytes: some Collection<UInt8>,
                             limits: ParseLimits = ParseLimits()) throws(RequestRejection) -> RequestFile {
        func reject(_ line: Int?, _ rule: String, _ message: String) -> RequestRejection {
            RequestRejection(file: fileName, line: line, rule: rule, message: message)
        }
        guard bytes.count <= limits.maxBytes else {
            throw reject(nil, "too-large", "the request file is larger than \(limits.maxBytes) bytes")
        }
        var data = Array(bytes)
        if data.starts(with: [0xEF, 0xBB, 0xBF]) { data.removeFirst(3) }
        guard let text = String(validating: data, as: UTF8.self) else {
            throw reject(firstInvalidUTF8Line(data), "not-utf8", "the request file is not valid UTF-8")
        }

        var builder = Builder(fileName: fileName)
        var lineNumber = 0
        // "\r\n" is a single Character in Swift, so both forms end a line.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            let trimmed = line.trimmingSpaces()
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            if looksLikeURL(trimmed) {
                try builder.startItem(url: String(trimmed), line: lineNumber, limits: limits)
                continue
            }
            guard let colon = trimmed.firstIndex(of: ":") else {
                throw reject(lineNumber, "malformed-line", "expected 'key: value' or a URL")
            }
            let key = trimmed[..<colon].trimmingSpaces().lowercased()
            let value = String(trimmed[trimmed.index(after: colon)...].trimmingSpaces())
            guard Key(rawValue: key) != nil else {
                let shown = key.count <= 40 && key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") })
                    ? "'\(key)'" : "this key"
                throw reject(lineNumber, "unknown-key", "unknown key \(shown); known keys: \(Key.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            if key == Key.url.rawValue {
                try builder.startItem(url: value, line: lineNumber, limits: limits)
            } else {
                try builder.set(Key(rawValue: key)!, value, line: lineNumber)
            }
        }
        return try builder.finish()
    }

    /// `scheme://…` with no space: a bare URL line (so `ftp://x` is refused for its scheme).
    static func looksLikeURL(_ s: Substring) -> Bool {
        guard let first = s.first, first.isASCII, first.isLetter, let sep = s.range(of: "://") else { return false }
        let scheme = s[..<sep.lowerBound]
        return scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == ".") }
            && !s.contains(" ") && !s.contains("\t")
    }

    static func firstInvalidUTF8Line(_ data: [UInt8]) -> Int {
        var line = 1
        var start = 0
        for (i, b) in data.enumerated() where b == 0x0A {
            if String(validating: data[start..<i], as: UTF8.self) == nil { return line }
            line += 1
            start = i + 1
        }
        return line
    }

    enum Key: String, CaseIterable {
        case url, earliestStart = "earliest-start", expectedBytes = "expected-bytes", name, sha256, priority,
             discretionary, group, header, maxBytes = "max-bytes"
    }

    /// Values of one item (or of the defaults), as set so far.
    struct Fields {
        var earliestStart: Date?
        var expectedBytes: Int64?
        var name: String?
        var sha256: String?
        var priority: Priority?
        var discretionary: Bool?
        var headers: [RequestHeader] = []
        var maxBytes: Int64?
        var seen: Set<String> = []
    }

    struct Builder {
        let fileName: String
        var defaults = Fields()
        var group: String?
        var current: (url: RequestURL, line: Int, fields: Fields)?
        var items: [RequestItem] = []

        init(fileName: String) { self.fileName = fileName }

        func reject(_ line: Int?, _ rule: String, _ message: String) -> RequestRejection {
            RequestRejection(file: fileName, line: line, rule: rule, message: message)
        }

        mutating func startItem(url text: String, line: Int, limits: ParseLimits) throws(RequestRejection) {
            try closeItem()
            guard items.count < limits.maxItems else {
                throw reject(line, "too-many-items", "more than \(limits.maxItems) items in one request file")
            }
            do {
                current = (try RequestURL(validating: text), line, Fields())
            } catch {
                throw reject(line, error.rule, "url: \(error.reason)")
            }
        }

        mutating func set(_ key: Key, _ value: String, line: Int) throws(RequestRejection) {
            if key == .group {
                guard current == nil && items.isEmpty else {
                    throw reject(line, "file-level-key", "group applies to the whole file; give it before the first url")
                }
                guard group == nil else { throw reject(line, "duplicate-key", "group is given twice") }
                if let why = PlainName.violation(of: value) { throw reject(line, "bad-group", "group \(why)") }
                group = value
                return
            }
            var fields = current?.fields ?? defaults
            if key != .header {
                guard !fields.seen.contains(key.rawValue) else {
                    throw reject(line, "duplicate-key", "\(key.rawValue) is given twice for the same \(current == nil ? "defaults" : "item")")
                }
                fields.seen.insert(key.rawValue)
            }
            switch key {
            case .earliestStart:
                guard let d = RFC3339.parse(value) else {
                    throw reject(line, "bad-time", "earliest-start must be an RFC 3339 time such as 2026-11-23T02:00:00Z")
                }
                fields.earliestStart = d
            case .expectedBytes, .maxBytes:
                guard let n = ByteCount.parse(value) else {
                    throw reject(line, "bad-number", "\(key.rawValue) must be a non-negative whole number of bytes, optionally with k, M, G or T")
                }
                if key == .expectedBytes { fields.expectedBytes = n } else { fields.maxBytes = n }
            case .name:
                if let why = PlainName.violation(of: value) { throw reject(line, "bad-name", "name \(why)") }
                fields.name = value
            case .sha256:
                guard value.utf8.count == 64, value.allSatisfy(\.isHexDigit) else {
                    throw reject(line, "bad-sha256", "sha256 must be 64 hexadecimal digits")
                }
                fields.sha256 = value.lowercased()
            case .priority:
                guard let p = Priority(rawValue: value.lowercased()) else {
                    throw reject(line, "bad-priority", "priority must be high, normal or low")
                }
                fields.priority = p
            case .discretionary:
                switch value.lowercased() {
                case "yes", "true", "1": fields.discretionary = true
                case "no", "false", "0": fields.discretionary = false
                default: throw reject(line, "bad-boolean", "discretionary must be yes or no")
                }
            case .header:
                let header = try parseHeader(value, line: line)
                fields.headers.removeAll { $0.name.lowercased() == header.name.lowercased() }
                fields.headers.append(header)
            case .url, .group:
                break
            }
            if current != nil { current!.fields = fields } else { defaults = fields }
        }

        func parseHeader(_ value: String, line: Int) throws(RequestRejection) -> RequestHeader {
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

        mutating func closeItem() throws(RequestRejection) {
            guard let (url, line, own) = current else { return }
            current = nil
            var headers = defaults.headers
            for h in own.headers {
                headers.removeAll { $0.name.lowercased() == h.name.lowercased() }
                headers.append(h)
            }
            items.append(RequestItem(
                index: items.count, line: line, url: url,
                name: own.name ?? defaults.name ?? PlainName.derived(from: url),
                earliestStart: own.earliestStart ?? defaults.earliestStart,
                expectedBytes: own.expectedBytes ?? defaults.expectedBytes,
                sha256: own.sha256 ?? defaults.sha256,
                priority: own.priority ?? defaults.priority ?? .normal,
                discretionary: own.discretionary ?? defaults.discretionary ?? false,
                headers: headers,
                maxBytes: own.maxBytes ?? defaults.maxBytes))
        }

        mutating func finish() throws(RequestRejection) -> RequestFile {
            try closeItem()
            guard !items.isEmpty else { throw reject(nil, "no-items", "the request file has no url") }
            return RequestFile(fileName: fileName, group: group ?? PlainName.sanitise(fileName), items: items)
        }
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
