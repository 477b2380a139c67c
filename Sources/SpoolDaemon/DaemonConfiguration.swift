import Foundation
import Logging
import SpoolScheduler

/// Everything `spoolfetch run` can be told. Built by the executable from flags, environment and
/// an optional config file; printed by `--print-config`.
public struct DaemonConfiguration: Sendable, Hashable, Codable {
    /// The spool root.
    public var spool: String = "spool"
    /// Where published files and markers go (default: `SPOOL/done`).
    public var finalFolder: String?
    /// Drain mode: exit when nothing is pending or running.
    public var once: Bool = false
    public var concurrency: Int = 16
    public var perHost: Int = 6
    /// `HH:MM-HH:MM`, local time; discretionary items run only inside it.
    public var window: String?
    /// Seconds without a byte before a transfer is cut and retried.
    public var stallTimeout: Int = 60
    /// Seconds after an item was first claimed after which it is not retried any more (7 days).
    public var resourceTimeout: Double = 7 * 24 * 3600
    /// First retry delay and cap, in seconds.
    public var retryBase: Double = 1
    public var retryCap: Double = 300
    /// Attempts per item before it fails for good (0: unlimited, bounded by the resource timeout).
    public var maxAttempts: Int = 10
    /// Daemon-wide receive-rate cap in bytes per second (0: none), shared among running transfers.
    public var maxRate: Int64 = 0
    /// Daemon-wide cap on any response body (0: none); a request's `max-bytes` may only lower it.
    public var maxBytes: Int64 = 0
    /// A body more than this many times its `expected-bytes` fails (unless `max-bytes` is set).
    public var expectSlack: Double = 2
    /// Bytes of free space kept on the staging (and final) filesystem.
    public var minFree: Int64 = 64 * 1024 * 1024
    /// Items per request file.
    public var maxItems: Int = 10_000
    /// Most requests claimed (held open and locked) at once; more wait in `incoming/`, in arrival
    /// order, and are claimed as earlier ones end. Bounded by the process's file limit.
    public var maxClaims: Int = 8192
    /// Seconds between scans of `active/` for requests whose worker died (0: only at start).
    public var adoptInterval: Double = 30
    public var caFile: String?
    public var caPath: String?
    /// Commands run after each item / each group (through `/bin/sh -c`).
    public var onItem: String?
    public var onGroup: String?
    public var logLevel: String = "info"

    public init() {}

    /// Checks values that flags cannot express; the message names the flag.
    public func validate() throws(ConfigurationError) {
        if concurrency < 1 { throw .init("--concurrency must be at least 1") }
        if perHost < 1 { throw .init("--per-host must be at least 1") }
        if let w = window, DailyWindow(parsing: w) == nil {
            throw .init("--window must look like 22:00-06:00 (HH:MM-HH:MM, start and end differ), got '\(w)'")
        }
        if stallTimeout < 1 { throw .init("--stall-timeout must be at least 1 second") }
        if resourceTimeout <= 0 { throw .init("--resource-timeout must be positive") }
        if retryBase <= 0 || retryCap < retryBase { throw .init("--retry-base must be positive and at most --retry-cap") }
        if maxAttempts < 0 { throw .init("--max-attempts must be 0 (unlimited) or more") }
        if maxRate < 0 || maxBytes < 0 || minFree < 0 { throw .init("sizes must not be negative") }
        if expectSlack < 1 { throw .init("--expect-slack must be at least 1") }
        if Logger.Level(rawValue: logLevel) == nil {
            throw .init("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }
}

/// A configuration value is unusable.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ message: String) { description = message }
}
