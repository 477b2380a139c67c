import Foundation
import SpoolCore
import Logging
import SpoolConfiguration
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
        /// A drain left items because a host could not be reached or space was short
        /// (`EX_TEMPFAIL`): nothing failed, and the next run may fetch them.
        public static let tryAgainLater: Int32 = 75
    }

    public static let version = "0.1.0"

    /// The daemon's logger: logfmt lines on stderr, with journald priority prefixes when stderr
    /// is the journal. Its level is shared by every copy: `var l = logger; l.logLevel = .debug`
    /// changes it for all (as a reload does).
    public static func makeLogger(level: Logger.Level) -> Logger {
        let setting = LogLevelSetting(level)
        let journal = JournalStream.isStandardError()
        return Logger(label: "spoolfetch") { LogfmtHandler(label: $0, level: setting, journal: journal) }
    }

    /// Runs the daemon with `configuration`; returns the process exit status.
    public static func run(_ configuration: DaemonConfiguration) -> Int32 {
        let logger = makeLogger(level: configuration.loggerLevel)
        do {
            let engine = try Engine(configuration: configuration, logger: logger)
            let summary = try engine.run()
            // A daemon whose watcher stopped exits non-zero, so that its service manager restarts it.
            if summary.watcherFailed { return ExitStatus.someFailed }
            return configuration.once || configuration.due ? summary.exitCode : ExitStatus.success
        } catch {
            logger.critical("\(error.description)")
            return ExitStatus.cannotStart
        }
    }
}
