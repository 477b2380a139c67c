import Foundation
import Logging

/// Structured log lines on stderr (`time=… level=… msg="…" key=value …`), one per event, which
/// journald keeps as they are and tools like `grep`/`awk` can read.
public struct LogfmtHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String

    public init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = "time=\(RFC3339Clock.now()) level=\(event.level.rawValue) msg=\(Self.quote(event.message.description))"
        let merged = event.metadata.map { metadata.merging($0) { _, new in new } } ?? metadata
        for key in merged.keys.sorted() {
            line += " \(key)=\(Self.quote("\(merged[key]!)"))"
        }
        line += "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// Quotes a value when it has spaces, quotes, `=` or control characters.
    static func quote(_ value: String) -> String {
        let needs = value.isEmpty || value.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline || $0 == "\\" }
        guard needs else { return value }
        var out = "\""
        for ch in value {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default: out.append(ch)
            }
        }
        return out + "\""
    }
}

enum RFC3339Clock {
    static func now() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        var t = time_t(tv.tv_sec)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1,
                      parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, Int(tv.tv_usec) / 1000)
    }
}
