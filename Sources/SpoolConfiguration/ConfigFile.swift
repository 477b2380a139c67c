import Foundation

/// `--config FILE`: `key = value` lines, keys named like the long flags of `spoolfetch run`
/// (`concurrency = 32`, `window = "22:00-06:00"`). It is the plain-value subset of TOML; `#`
/// starts a comment; a quoted value may escape `"` and `\` with a backslash. Flags override the
/// file; the file overrides the built-in defaults. Written by hand rather than with a TOML
/// library: a couple of dozen scalar keys, the errors must name the file, the line and the key,
/// and the bare values it accepts (`inotify = yes`, `min-free = auto`, `max-rate = 1M 08:00-20:00, 0`,
/// all printed by `--print-config`) are not TOML, so a TOML parser would refuse them
/// (docs/ARCHITECTURE.md, "Libraries and why").
extension DaemonConfiguration {
    /// Every key the file (and `--print-config`) knows, in print order.
    public static var fileKeys: [String] { ConfigurationKey.all.map(\.name) }

    /// Applies a config file's text; errors name `path:line:` and the key.
    public mutating func apply(configFile text: String, path: String) throws(ConfigurationError) {
        var lineNumber = 0
        var seen: [String: Int] = [:]
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let eq = line.firstIndex(of: "=") else {
                throw ConfigurationError("\(path):\(lineNumber): expected 'key = value', got '\(line)'")
            }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            let rawValue = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            guard let value = Self.unquote(rawValue) else {
                throw ConfigurationError("\(path):\(lineNumber): \(key): unterminated or malformed quoted value \(rawValue)")
            }
            if let first = seen[key] {
                throw ConfigurationError("\(path):\(lineNumber): \(key) is already set on line \(first)")
            }
            seen[key] = lineNumber
            do throws(ConfigurationError) {
                try set(key, value)
            } catch {
                throw ConfigurationError("\(path):\(lineNumber): \(error.description)")
            }
        }
    }

    /// Sets one setting by its key (the long flag's name); the error names the key and the
    /// expected form, and lists the known keys (with the closest one) for an unknown key.
    public mutating func set(_ key: String, _ value: String) throws(ConfigurationError) {
        guard let entry = ConfigurationKey.named(key) else {
            let suggestion = Self.closestKey(to: key).map { " (did you mean \($0)?)" } ?? ""
            throw ConfigurationError("unknown key '\(key)'\(suggestion); known keys: \(Self.fileKeys.joined(separator: ", "))")
        }
        try entry.set(value, in: &self)
    }

    /// The effective configuration in the config file's own format.
    public var printed: String {
        ConfigurationKey.all.map { "\($0.name) = \($0.format(self))" }.joined(separator: "\n") + "\n"
    }

    /// A TOML basic string's content, or the bare value; nil for a broken quoted value.
    static func unquote(_ value: String) -> String? {
        guard value.hasPrefix("\"") else { return value }
        var out = ""
        var escaped = false
        var closed = false
        for ch in value.dropFirst() {
            if closed { return ch == " " || ch == "\t" ? out : nil }
            if escaped {
                switch ch {
                case "\"", "\\": out.append(ch)
                case "n": out.append("\n")
                case "t": out.append("\t")
                default: return nil
                }
                escaped = false
            } else if ch == "\\" {
                escaped = true
            } else if ch == "\"" {
                closed = true
            } else {
                out.append(ch)
            }
        }
        return closed ? out : nil
    }

    /// The known key at the smallest edit distance (at most 2), for "did you mean".
    static func closestKey(to key: String) -> String? {
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            var row = Array(0...b.count)
            for i in 1...max(1, a.count) where !a.isEmpty {
                var previous = row[0]
                row[0] = i
                for j in 1...max(1, b.count) where !b.isEmpty {
                    let old = row[j]
                    row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                    previous = old
                }
            }
            return row[b.count]
        }
        let best = fileKeys.map { ($0, distance(Array(key), Array($0))) }.min { $0.1 < $1.1 }
        return best.flatMap { $0.1 <= 2 ? $0.0 : nil }
    }
}
