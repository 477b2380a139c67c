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
    /// Item events, handled one at a time: one raised while another's actions are carried out
    /// waits for them (`SerialEvents`).
    let events = SerialEvents<(ItemEvent, ItemRecord)>()
    /// When requests' `deadline:` passes (see `RequestDeadlines`).
    let deadlines: RequestDeadlines
    private(set) var policy: RetryPolicy
    private var jitter = JitterSource()

    init(configuration: DaemonConfiguration) {
        policy = RetryPolicy(configuration)
        deadlines = RequestDeadlines(byDefault: configuration.deadline.flatMap(RequestDeadline.init(parsing:)))
    }

    /// A reload: retries decided from now on follow the new settings.
    func reconfigure(_ configuration: DaemonConfiguration) { policy = RetryPolicy(configuration) }

    /// The facts an item's machine decides with at `now`, besides its event: whether the daemon
    /// stops, a fresh jitter, the failure facts to read if it fails, whether the refresh hook may
    /// be asked (once an attempt, for the request's own URL), and for an item with mirrors
    /// whether another source is left and its host has been down past `--mirror-after`
    /// (`hostDownLong`, asked only then).
    func context(for record: ItemRecord, now: Date, stopping: Bool, refreshHook: Bool,
                 failureFacts: @escaping () -> ItemFailureFacts, hostDownLong: (ItemRecord) -> Bool) -> LifecycleContext {
        var context = LifecycleContext(now: now, stopping: stopping, jitter: jitter.next(), failureFacts: failureFacts)
        context.canRefreshURL = refreshHook && record.refreshedInAttempt != record.attempts && record.sourceIndex == 0
        if record.summary.hasMirrors {
            context.nextSource = record.sources?.hasNext ?? true
            context.hostDownLong = hostDownLong(record)
        }
        return context
    }
}
