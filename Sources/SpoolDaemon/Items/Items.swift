import Foundation
import SpoolCore
import SpoolConfiguration
import SpoolRequest

/// Every claimed request and item, and what their machines decide with: the retry policy and
/// the jitter of back-offs, the requests' deadlines, and the claimed file the last item start
/// read (kept open for the next). Engine thread only.
final class Items {
    let table = ItemTable()
    /// The claimed file the last item start read, kept open for the next (see `RequestFileSlot`).
    let requestFile = RequestFileSlot()
    /// When requests' `deadline:` passes (see `RequestDeadlines`).
    let deadlines: RequestDeadlines
    private(set) var policy: RetryPolicy
    /// The jitter of the contexts the executor gives item events (`ItemShell.decide`).
    var jitter = JitterSource()

    init(configuration: DaemonConfiguration) {
        policy = RetryPolicy(configuration)
        deadlines = RequestDeadlines(byDefault: configuration.deadline.flatMap(RequestDeadline.init(parsing:)))
    }

    /// A reload: retries decided from now on follow the new settings.
    func reconfigure(_ configuration: DaemonConfiguration) { policy = RetryPolicy(configuration) }
}
