import Foundation
import Logging
import SpoolRequest
import SpoolScheduler

/// One setting of `spoolfetch run`: the single place that says its name (the long flag and the
/// config-file key are the same word), how its text is read and printed, what values are allowed,
/// its help text, and whether `SIGHUP` may change it while the daemon runs.
///
/// `ConfigurationKey.all` is the table. The config file, `--print-config`, validation, the flags'
/// help texts and the reload diff all read it; the flags themselves are swift-argument-parser
/// options (they must be declared as properties), and a test checks them against the table.
public struct ConfigurationKey: Sendable {
    /// The long flag without `--`, and the config-file key.
    public let name: String
    /// The placeholder in `--help` (`n`, `seconds`, `bytes`, …).
    public let valueName: String
    /// One sentence for `--help`; the default and an example are appended.
    public let summary: String
    /// A valid value other than the default, used in the help text and by the tests.
    public let example: String
    /// Whether a running daemon applies a new value on `SIGHUP`.
    public let reloadable: Bool
    /// Copies this key's value from the second configuration into the first (for a reload).
    let copy: @Sendable (inout DaemonConfiguration, DaemonConfiguration) -> Void
    let parse: @Sendable (inout DaemonConfiguration, String) -> String?
    /// The value in the config file's syntax (strings quoted).
    public let format: @Sendable (DaemonConfiguration) -> String
    /// nil when the value is allowed; otherwise what is wrong, starting with the key's name.
    public let check: @Sendable (DaemonConfiguration) -> String?

    /// Sets the key from text; the error names the key and the expected form.
    public func set(_ text: String, in configuration: inout DaemonConfiguration) throws(ConfigurationError) {
        if let problem = parse(&configuration, text) { throw ConfigurationError(problem) }
        if let problem = check(configuration) { throw ConfigurationError(problem) }
    }

    /// `--help` text: the summary, the default, an example — quoted for the shell where it
    /// needs it, so that it runs as printed (`--max-rate '1M 08:00-20:00, 0'`).
    public var help: String {
        "\(summary) (default \(defaultText)). Example: \(exampleArguments)"
    }

    /// The example as shell arguments: `--NAME VALUE`, VALUE quoted when the shell would split
    /// or expand it.
    public var exampleArguments: String { "--\(name) \(Self.shellWord(example))" }

    /// `text` as one shell word: as it is when it holds nothing the shell treats specially, else
    /// in single quotes (a single quote inside written `'\''`).
    public static func shellWord(_ text: String) -> String {
        let plain = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,")
        if !text.isEmpty, text.unicodeScalars.allSatisfy(plain.contains) { return text }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// The built-in default as a user would write it.
    public var defaultText: String {
        let printed = format(DaemonConfiguration())
        return printed == "\"\"" ? "none" : printed.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }

    public static func named(_ name: String) -> ConfigurationKey? { byName[name] }

    private static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
}

// MARK: The kinds of value

extension ConfigurationKey {
    static func text(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, String> & Sendable, value: String,
                     reload: Bool, example: String, _ summary: String,
                     rule: @escaping @Sendable (String) -> String? = { _ in nil }) -> ConfigurationKey {
        ConfigurationKey(name: name, valueName: value, summary: summary, example: example, reloadable: reload,
                         copy: { $0[keyPath: path] = $1[keyPath: path] },
                         parse: { c, text in c[keyPath: path] = text; return nil },
                         format: { quoted($0[keyPath: path]) },
                         check: { c in rule(c[keyPath: path]).map { "\(name) \($0)" } })
    }

    /// A string where empty means "none".
    static func optionalText(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, String?> & Sendable, value: String,
                             reload: Bool, example: String, _ summary: String,
                             rule: @escaping @Sendable (String) -> String? = { _ in nil }) -> ConfigurationKey {
        ConfigurationKey(name: name, valueName: value, summary: summary, example: example, reloadable: reload,
                         copy: { $0[keyPath: path] = $1[keyPath: path] },
                         parse: { c, text in c[keyPath: path] = text.isEmpty ? nil : text; return nil },
                         format: { quoted($0[keyPath: path] ?? "") },
                         check: { c in c[keyPath: path].flatMap(rule).map { "\(name) \($0)" } })
    }

    static func int(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, Int> & Sendable, atLeast minimum: Int,
                    value: String = "n", reload: Bool, example: String, _ summary: String) -> ConfigurationKey {
        ConfigurationKey(name: name, valueName: value, summary: summary, example: example, reloadable: reload,
                         copy: { $0[keyPath: path] = $1[keyPath: path] },
                         parse: { c, text in
                             guard let v = Int(text) else { return "\(name) must be a whole number, got '\(text)'" }
                             c[keyPath: path] = v
                             return nil
                         },
                         format: { "\($0[keyPath: path])" },
                         check: { c in c[keyPath: path] >= minimum ? nil : "\(name) must be at least \(minimum), got \(c[keyPath: path])" })
    }

    /// A number of seconds (fractions allowed).
    static func seconds(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, Double> & Sendable, positive: Bool,
                        reload: Bool, example: String, _ summary: String) -> ConfigurationKey {
        number(name, path, value: "seconds", positive: positive, reload: reload, example: example, summary)
    }

    static func number(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, Double> & Sendable, value: String,
                       positive: Bool, atLeast minimum: Double = 0, reload: Bool, example: String,
                       _ summary: String) -> ConfigurationKey {
        ConfigurationKey(name: name, valueName: value, summary: summary, example: example, reloadable: reload,
                         copy: { $0[keyPath: path] = $1[keyPath: path] },
                         parse: { c, text in
                             guard let v = Double(text), v.isFinite else { return "\(name) must be a number, got '\(text)'" }
                             c[keyPath: path] = v
                             return nil
                         },
                         format: { formatNumber($0[keyPath: path]) },
                         check: { c in
                             let v = c[keyPath: path]
                             if positive && v <= 0 { return "\(name) must be more than 0, got \(formatNumber(v))" }
                             if v < minimum { return "\(name) must be at least \(formatNumber(minimum)), got \(formatNumber(v))" }
                             return nil
                         })
    }

    /// `yes` or `no` (also `true`/`false`, `on`/`off`, `1`/`0`); printed as `yes`/`no`.
    static func yesNo(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, Bool> & Sendable,
                      reload: Bool, example: String, _ summary: String) -> ConfigurationKey {
        ConfigurationKey(name: name, valueName: "yes|no", summary: summary, example: example, reloadable: reload,
                         copy: { $0[keyPath: path] = $1[keyPath: path] },
                         parse: { c, text in
                             switch text.lowercased() {
                             case "yes", "true", "on", "1": c[keyPath: path] = true
                             case "no", "false", "off", "0": c[keyPath: path] = false
                             default: return "\(name) must be yes or no, got '\(text)'"
                             }
                             return nil
                         },
                         format: { $0[keyPath: path] ? "yes" : "no" },
                         check: { _ in nil })
    }

    /// A byte count with the request files' `k`/`M`/`G`/`T` suffixes (powers of 1024).
    static func bytes(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, Int64> & Sendable, value: String = "bytes",
                      positive: Bool = false, reload: Bool, example: String, _ summary: String) -> ConfigurationKey {
        ConfigurationKey(name: name, valueName: value, summary: summary, example: example, reloadable: reload,
                         copy: { $0[keyPath: path] = $1[keyPath: path] },
                         parse: { c, text in
                             guard let v = ByteCount.parse(text) else {
                                 return "\(name) must be a byte count such as 512M (k, M, G, T: powers of 1024), got '\(text)'"
                             }
                             c[keyPath: path] = v
                             return nil
                         },
                         format: { ByteCount.format($0[keyPath: path]) },
                         check: { c in positive && c[keyPath: path] <= 0 ? "\(name) must be more than 0" : nil })
    }

    /// A byte count, or a word (`auto`) that leaves it to the daemon (nil).
    static func bytesOrAuto(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, Int64?> & Sendable, auto: String,
                            reload: Bool, example: String, _ summary: String) -> ConfigurationKey {
        ConfigurationKey(name: name, valueName: "bytes|\(auto)", summary: summary, example: example, reloadable: reload,
                         copy: { $0[keyPath: path] = $1[keyPath: path] },
                         parse: { c, text in
                             if text == auto { c[keyPath: path] = nil; return nil }
                             guard let v = ByteCount.parse(text) else {
                                 return "\(name) must be \(auto) or a byte count such as 512M (k, M, G, T: powers of 1024), got '\(text)'"
                             }
                             c[keyPath: path] = v
                             return nil
                         },
                         format: { $0[keyPath: path].map(ByteCount.format) ?? auto },
                         check: { _ in nil })
    }

    /// A byte rate, or rates by time of day (`RateSchedule`): `1M 08:00-20:00, 0`. A constant is
    /// printed as its number, a schedule quoted.
    static func rateSchedule(_ name: String, _ path: WritableKeyPath<DaemonConfiguration, RateSchedule> & Sendable,
                             reload: Bool, example: String, _ summary: String) -> ConfigurationKey {
        ConfigurationKey(name: name, valueName: "bytes/s|schedule", summary: summary, example: example, reloadable: reload,
                         copy: { $0[keyPath: path] = $1[keyPath: path] },
                         parse: { c, text in
                             do throws(RateScheduleError) {
                                 c[keyPath: path] = try RateSchedule(parsing: text, amount: ByteCount.parse)
                                 return nil
                             } catch {
                                 let forms = "a byte count such as 512M (k, M, G, T: powers of 1024) or a schedule such as "
                                     + "'1M 08:00-20:00, 0' (the last rate outside the windows)"
                                 return "\(name) must be \(forms): \(error.message)"
                             }
                         },
                         format: { c in
                             let schedule = c[keyPath: path]
                             let rates = schedule.windows.map { "\(ByteCount.format($0.rate)) \($0.window)" }
                                 + [ByteCount.format(schedule.defaultRate)]
                             return schedule.windows.isEmpty ? rates[0] : quoted(rates.joined(separator: ", "))
                         },
                         check: { _ in nil })
    }

    static func quoted(_ s: String) -> String {
        "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// `300` rather than `300.0`; fractions as they are.
    public static func formatNumber(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }
}
