import Foundation
import SpoolCore
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// Structured log lines on stderr (`time=… level=… msg="…" key=value …`), one per event, which
/// journald keeps as they are and tools like `grep`/`awk` can read.
///
/// When stderr is the journal (see `JournalStream`), each line starts with the sd-daemon
/// priority prefix (`<3>` for error, …), so `journalctl -p warning` filters by level.
///
/// The level lives in a shared `LogLevelSetting`: every copy of the logger (the engine's, the
/// hook runner's) follows a change made through any of them — `SIGHUP` changes it at run time.
public struct LogfmtHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let level: LogLevelSetting
    private let journalPrefix: Bool
    private let write: @Sendable (String) -> Void

    public init(label: String, level: Logger.Level) {
        self.init(label: label, level: LogLevelSetting(level), journal: JournalStream.isStandardError())
    }

    /// `write` receives whole lines, newline included (tests capture them; the default writes
    /// each line to stderr with one `write(2)`, so lines from several threads never interleave).
    public init(label: String, level: LogLevelSetting, journal: Bool,
                write: @escaping @Sendable (String) -> Void = LogfmtHandler.writeToStandardError) {
        self.label = label
        self.level = level
        self.journalPrefix = journal
        self.write = write
    }

    public var logLevel: Logger.Level {
        get { level.value }
        set { level.value = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = journalPrefix ? JournalStream.prefix(for: event.level) : ""
        line += "time=\(RFC3339Clock.now()) level=\(event.level.rawValue) msg=\(Self.quote(event.message.description))"
        let merged = event.metadata.map { metadata.merging($0) { _, new in new } } ?? metadata
        for key in merged.keys.sorted() {
            line += " \(key)=\(Self.quote("\(merged[key]!)"))"
        }
        write(line + "\n")
    }

    public static let writeToStandardError: @Sendable (String) -> Void = { line in
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Quotes a value when it has spaces, quotes, `=`, backslashes or control characters; control
    /// characters are escaped, so one event is always one line.
    static func quote(_ value: String) -> String {
        let needs = value.isEmpty || value.unicodeScalars.contains {
            $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\\" || $0.properties.generalCategory == .control
                || $0 == "\u{2028}" || $0 == "\u{2029}" || $0 == "\u{85}"
        }
        guard needs else { return value }
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.properties.generalCategory == .control || scalar == "\u{2028}" || scalar == "\u{2029}":
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// A log level shared by every copy of a logger.
public final class LogLevelSetting: Sendable {
    private let level: Mutex<Logger.Level>
    public init(_ level: Logger.Level) { self.level = Mutex(level) }
    public var value: Logger.Level {
        get { level.withLock { $0 } }
        set { level.withLock { $0 = newValue } }
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
