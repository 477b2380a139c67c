import Foundation
import SpoolCore
import SpoolConfiguration
import SpoolProcess
import Synchronization
import SpoolStore
import SpoolTransfer
import SpoolWatcher

/// How a run ended.
public struct RunSummary: Sendable, Hashable {
    public var published = 0
    public var failed = 0
    public var rejected = 0
    /// Request files that could not be claimed (a file-system error, logged); they stay in `incoming/`.
    public var unclaimed = 0
    /// The watcher stopped (a watched folder could not be made again): the daemon stopped blind.
    public var watcherFailed = false
    /// Requests whose group could not be ended for good (`run --once`, a permanent error): they
    /// stay in `active/` for the next run.
    public var unended = 0
    /// Items a due drain left because their host could not be reached, or for want of space:
    /// the next run may fetch them (`EX_TEMPFAIL`).
    public var leftForHosts = 0
    public var leftForSpace = 0
    /// Every item published (0); an item failed or a request was rejected (1); else items left for
    /// an unreachable host or for space (75, `EX_TEMPFAIL` of sysexits.h, as Postfix and
    /// sendmail use it: try again later).
    public var exitCode: Int32 {
        if failed > 0 || rejected > 0 || unclaimed > 0 || unended > 0 || watcherFailed { return Daemon.ExitStatus.someFailed }
        if leftForHosts > 0 || leftForSpace > 0 { return Daemon.ExitStatus.tryAgainLater }
        return Daemon.ExitStatus.success
    }
}

/// The transfer session's waker, set once the session exists (the watcher starts first and may
/// post before that; such messages wait in the inbox for the first loop turn).
final class WakeTarget: Sendable {
    private let waker = Mutex<TransferWaker?>(nil)
    func set(_ w: TransferWaker) { waker.withLock { $0 = w } }
    func wake() { waker.withLock { $0 }?.wake() }
}

/// Why the daemon could not start.
public enum DaemonError: Error, CustomStringConvertible {
    case spool(StoreError)
    case watcher(WatcherError)
    case transfer(TransferSetupError)
    case configuration(ConfigurationError)
    case signals(SignalSetupError)

    public var description: String {
        switch self {
        case .spool(let e): return "cannot use the spool: \(e)"
        case .watcher(let e): return "cannot watch incoming/: \(e)"
        case .transfer(let e): return "cannot set up libcurl: \(e)"
        case .configuration(let e): return "bad configuration: \(e)"
        case .signals(let e): return "cannot install the stop signal handlers: \(e)"
        }
    }
}
