import Foundation

/// One setting whose value differs between two configurations, in the config file's syntax.
public struct ConfigurationChange: Sendable, Hashable, CustomStringConvertible {
    public var key: String
    public var old: String
    public var new: String
    public var description: String { "\(key): \(old) -> \(new)" }
}

/// What `SIGHUP` found on reading the configuration again.
public struct ConfigurationReload: Sendable {
    /// The running configuration with every run-time-changeable difference applied (and the
    /// others left as they were): what the engine should use from now on.
    public var configuration: DaemonConfiguration
    /// Changes taken (log them; apply each: concurrency, rates, hooks, log level, …).
    public var applied: [ConfigurationChange]
    /// Changes that take a restart (the spool, the final folder, TLS trust, the stall timeout):
    /// not applied; log them as such.
    public var needsRestart: [ConfigurationChange]

    public var isEmpty: Bool { applied.isEmpty && needsRestart.isEmpty }
}

extension DaemonConfiguration {
    /// Reads the configuration again from the same source (the config file, with the flags given
    /// at start still on top) and compares it with this one. Throws — and changes nothing — when
    /// the file is now unreadable or invalid; the daemon then keeps running as it was.
    public func reloaded() throws(ConfigurationError) -> ConfigurationReload {
        guard let source else { return ConfigurationReload(configuration: self, applied: [], needsRestart: []) }
        let fresh: DaemonConfiguration
        do throws(ConfigurationSource.Failure) { fresh = try source.load() } catch {
            switch error { case .flag(let e), .configuration(let e): throw e }
        }
        return Self.reload(from: self, to: fresh)
    }

    /// The pure part of `reloaded()`: which keys differ, split by `ConfigurationKey.reloadable`.
    public static func reload(from running: DaemonConfiguration, to fresh: DaemonConfiguration) -> ConfigurationReload {
        var next = running
        var applied: [ConfigurationChange] = []
        var needsRestart: [ConfigurationChange] = []
        for key in ConfigurationKey.all {
            let old = key.format(running), new = key.format(fresh)
            guard old != new else { continue }
            let change = ConfigurationChange(key: key.name, old: old, new: new)
            if key.reloadable {
                key.copy(&next, fresh)
                applied.append(change)
            } else {
                needsRestart.append(change)
            }
        }
        return ConfigurationReload(configuration: next, applied: applied, needsRestart: needsRestart)
    }
}
