import Foundation
import SpoolRequest

/// `--config FILE`: `key = value` lines, keys named like the long flags of `spoolfetch run`
/// (`concurrency = 32`, `window = "22:00-06:00"`). It is the plain-value subset of TOML; `#`
/// starts a comment. Flags override the file; the file overrides the built-in defaults.
/// Written by hand rather than with a TOML library: a dozen scalar keys, and the errors must
/// name the line and the key.
extension DaemonConfiguration {
    /// Every key the file (and `--print-config`) knows, in print order.
    public static let fileKeys = [
        "spool", "final-folder", "concurrency", "per-host", "window", "stall-timeout", "resource-timeout",
        "retry-base", "retry-cap", "max-attempts", "max-rate", "max-bytes", "expect-slack", "min-free", "max-items",
        "max-claims", "adopt-interval", "ca-file", "ca-path", "on-item", "on-group", "log-level",
    ]

    public mutating func apply(configFile text: String, path: String) throws(ConfigurationError) {
        var lineNumber = 0
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let eq = line.firstIndex(of: "=") else {
                throw ConfigurationError("\(path):\(lineNumber): expected 'key = value'")
            }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            var value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            do throws(ConfigurationError) {
                try set(key, value)
            } catch {
                throw ConfigurationError("\(path):\(lineNumber): \(error.description)")
            }
        }
    }

    /// Sets one option by its flag name; the error names the key and the expected form.
    public mutating func set(_ key: String, _ value: String) throws(ConfigurationError) {
        func int() throws(ConfigurationError) -> Int {
            guard let v = Int(value) else { throw ConfigurationError("\(key) must be a whole number, got '\(value)'") }
            return v
        }
        func double() throws(ConfigurationError) -> Double {
            guard let v = Double(value) else { throw ConfigurationError("\(key) must be a number, got '\(value)'") }
            return v
        }
        func bytes() throws(ConfigurationError) -> Int64 {
            guard let v = ByteCount.parse(value) else { throw ConfigurationError("\(key) must be a byte count such as 512M, got '\(value)'") }
            return v
        }
        switch key {
        case "spool": spool = value
        case "final-folder": finalFolder = value.isEmpty ? nil : value
        case "concurrency": concurrency = try int()
        case "per-host": perHost = try int()
        case "window": window = value.isEmpty ? nil : value
        case "stall-timeout": stallTimeout = try int()
        case "resource-timeout": resourceTimeout = try double()
        case "retry-base": retryBase = try double()
        case "retry-cap": retryCap = try double()
        case "max-attempts": maxAttempts = try int()
        case "max-rate": maxRate = try bytes()
        case "max-bytes": maxBytes = try bytes()
        case "expect-slack": expectSlack = try double()
        case "min-free": minFree = try bytes()
        case "max-items": maxItems = try int()
        case "max-claims": maxClaims = try int()
        case "adopt-interval": adoptInterval = try double()
        case "ca-file": caFile = value.isEmpty ? nil : value
        case "ca-path": caPath = value.isEmpty ? nil : value
        case "on-item": onItem = value.isEmpty ? nil : value
        case "on-group": onGroup = value.isEmpty ? nil : value
        case "log-level": logLevel = value
        default: throw ConfigurationError("unknown key '\(key)'; known keys: \(Self.fileKeys.joined(separator: ", "))")
        }
    }

    /// The effective configuration in the config file's own format.
    public var printed: String {
        func q(_ s: String?) -> String { "\"\(s ?? "")\"" }
        let values: [String: String] = [
            "spool": q(spool), "final-folder": q(finalFolder), "concurrency": "\(concurrency)", "per-host": "\(perHost)",
            "window": q(window), "stall-timeout": "\(stallTimeout)", "resource-timeout": "\(resourceTimeout)",
            "retry-base": "\(retryBase)", "retry-cap": "\(retryCap)", "max-attempts": "\(maxAttempts)",
            "max-rate": "\(maxRate)", "max-bytes": "\(maxBytes)", "expect-slack": "\(expectSlack)", "min-free": "\(minFree)",
            "max-items": "\(maxItems)", "max-claims": "\(maxClaims)", "adopt-interval": "\(adoptInterval)",
            "ca-file": q(caFile), "ca-path": q(caPath), "on-item": q(onItem), "on-group": q(onGroup), "log-level": q(logLevel),
        ]
        return Self.fileKeys.map { "\($0) = \(values[$0]!)" }.joined(separator: "\n") + "\n"
    }
}
