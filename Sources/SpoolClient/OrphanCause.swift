import Foundation
import SpoolStore

/// The cause of an item `spoolfetch cancel` files without a daemon (`OrphanCancel`): what the last
/// drain's record says it waited on (its host down, or its state and reason), else that no daemon
/// was left to run it. The daemon's own cancels decide theirs in the core (`ItemCause`); here only
/// the spool's records are known.
enum OrphanCause {
    /// `id`: `REQUEST#INDEX`; `hostKey`: its URL's `host:port`; `attempts`: its state file's.
    static func cause(id: String, hostKey: String, attempts: Int, drains: [DrainRecord]) -> FailureCause {
        for drain in drains.sorted(by: { $0.endedAt > $1.endedAt }) {
            if let down = drain.unreachableHosts.first(where: { $0.host == hostKey }) {
                return FailureCause(code: "host-unreachable",
                                    message: "host \(down.host) unreachable since \(down.since) (last drain, pid \(drain.pid), ended "
                                        + "\(drain.endedAt)); last error: \(down.lastError)",
                                    host: hostKey, attempts: attempts, waitingFor: "pending")
            }
            if let task = drain.itemsLeft.first(where: { $0.id == id }) {
                return FailureCause(code: task.state, message: task.waitingFor ?? "the last drain (pid \(drain.pid)) left it \(task.state)",
                                    host: hostKey, attempts: attempts, waitingFor: task.state)
            }
        }
        return FailureCause(code: "no-daemon", message: "its worker is gone and no daemon took it over", host: hostKey,
                            attempts: attempts)
    }
}
