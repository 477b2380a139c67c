import Foundation
import Logging
import SpoolRequest

/// The entry points the executable calls; it knows nothing else of the daemon.
public enum Daemon {
    /// Exit statuses of `spoolfetch run` (documented in README.md).
    public enum ExitStatus {
        /// Drained; every item published.
        public static let success: Int32 = 0
        /// Drained; an item failed or a request was rejected.
        public static let someFailed: Int32 = 1
        /// Could not start: bad configuration, unusable spool, inotify or libcurl set-up failed.
        public static let cannotStart: Int32 = 3
    }

    public static let version = "0.1.0"

    /// Runs the daemon with `configuration`; returns the process exit status.
    public static func run(_ configuration: DaemonConfiguration) -> Int32 {
        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        let logger = Logger(label: "spoolfetch") { LogfmtHandler(label: $0, level: level) }
        do {
            let engine = try Engine(configuration: configuration, logger: logger)
            let summary = try engine.run()
            return configuration.once ? summary.exitCode : ExitStatus.success
        } catch {
            logger.critical("\(error.description)")
            return ExitStatus.cannotStart
        }
    }
}
