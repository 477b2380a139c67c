import Foundation
import SpoolCore
import SpoolMetrics
import Logging
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// Item events go in through `executor` (`ItemExecutor`, SpoolCore: `executor.send(event, to:
/// record)`), which hands each to the item's lifecycle and carries out the actions through
/// `ItemShell`, the daemon's ports. Here: the start problems the loop reports (the answers of
/// hosts are `TransferBook`'s, through `TransferShell`). The decisions are all in `ItemLifecycle`.
extension Engine {
    func couldNotStart(_ record: ItemRecord, _ problem: StartProblem, _ message: String) {
        if problem == .shortOfResources {
            logger.warning("could not open the item's files (out of runState.descriptors or memory); it waits and tries again",
                           metadata: ["item": "\(record.id)", "error": "\(message)"])
        }
        executor.send(.couldNotStart(problem, message: message), to: record)
    }
}
