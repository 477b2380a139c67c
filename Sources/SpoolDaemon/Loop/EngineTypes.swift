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
    /// Every item published, or an item failed or a request was rejected.
    public var exitCode: Int32 { failed > 0 || rejected > 0 || unclaimed > 0 || unended > 0 || watcherFailed ? Daemon.ExitStatus.someFailed : Daemon.ExitStatus.success }
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
