import Foundation
import SpoolRequest

// The ports through which `ItemExecutor` reaches the world: small protocols, one per room an
// effect goes to. The daemon gives the executor its real rooms behind them (`ItemShell`, in
// SpoolDaemon); the simulator gives it simulated ones (`SimItemPorts`, in the core's tests). An
// answer that comes later (a part opened, a transfer ended, a batch reported) goes back through
// the executor's `send`, which queues it behind the event being handled.
//
// `Key` names an item (the daemon's record, the simulator's number); `Part` and `Job` are the
// shell's open staging file and publish job, which the machine holds and the effects carry;
// `Receipt` the shell's record of a published file, which the events carry to the published phase.

/// Where the items' machines live, and the facts besides the event they decide with.
public protocol ItemMachinePort: AnyObject {
    associatedtype Key
    associatedtype Part
    associatedtype Job
    associatedtype Receipt
    /// Hands `event` to the machine of `key` through its one entry, `handle`, with the retry
    /// policy and the facts besides the event (clock, stop flag, jitter, the failure facts, read
    /// only if the item fails); returns the effects. The machine lives with the port (the
    /// daemon's item record, the simulator's table), and so does the context: its failure facts
    /// are a closure on the port's stack, which costs no allocation per event. When the effects
    /// are not empty the item changed: the port notes it (its table, the status report, a
    /// trace). No effect when there is nothing to decide: the item is unknown, or has ended.
    func decide(_ key: Key, _ event: ItemEvent<Part, Job, Receipt>) -> [ItemEffect<Part, Job>]
}

/// The scheduler: slots, timers, and the hold of a host that cannot be reached.
public protocol ItemSchedulingPort: AnyObject {
    associatedtype Key
    func schedule(_ key: Key)
    func unschedule(_ key: Key)
    func releaseSlot(_ key: Key)
    /// Back to the timer heap until `at`; `holdHost`: its whole host waits too.
    func retry(_ key: Key, at: Date, holdHost: Bool)
    /// Its host did not answer: the host is held for one probe at a time, and the items that
    /// wait on it are told (`deadlineCheck`, `sourceUnreachable`, through the executor's `send`).
    func hostUnreachable(_ key: Key, error: String)
}

/// The transfer session and what an attempt's start reads.
public protocol ItemTransferPort: AnyObject {
    associatedtype Key
    associatedtype Part
    associatedtype Job
    associatedtype Receipt
    /// Reads the item's description, its URL's expiry and its credentials for this attempt.
    func checkStart(_ key: Key) -> StartCheck
    /// Opens the part and starts the transfer. What follows comes back through `send`:
    /// `partOpened`, then `transferEnded`; or `couldNotStart`, `refusedBeforeRequest`.
    func startTransfer(_ key: Key, credentials: [RequestHeader])
    func stopTransfer(_ key: Key, part: Part?)
    func nextSource(_ key: Key, part: Part?)
    func saveResumeState(_ key: Key, part: Part?)
    /// Asks the refresh hook for a new URL: its answer now, or nil when it comes later (`send`).
    func refreshURL(_ key: Key, reason: String) -> ItemEvent<Part, Job, Receipt>?
}

/// The space gate's queue of items waiting for room.
public protocol ItemSpacePort: AnyObject {
    associatedtype Key
    func waitForSpace(_ key: Key, reason: String)
    func leaveSpaceQueue(_ key: Key)
}

/// The publisher: jobs built from verified parts, given to batches.
public protocol ItemPublishPort: AnyObject {
    associatedtype Key
    associatedtype Part
    associatedtype Job
    /// Builds and queues the publish job of the verified `part`; returns the job the machine
    /// is to hold (answered `publishQueued`), nil when there is none to hold (an upload).
    func publish(_ key: Key, sha256: String, part: Part?) -> Job?
    func retryPublish(_ key: Key, job: Job?, at: Date)
    /// Takes the item's job out of the queue if no batch has it: true when it did (answered
    /// `publishWithdrawn`).
    func withdrawPublish(_ key: Key) -> Bool
}

/// The item's files in staging, and its ending.
public protocol ItemEndingPort: AnyObject {
    associatedtype Key
    func discardPartial(_ key: Key)
    func keepPartialForRetry(_ key: Key)
    /// The item failed for good: its state written, its part removed (unless kept for a
    /// retry); `wasPublishing`: its job is dropped from the publisher.
    func failed(_ key: Key, _ failure: ItemFailed, wasPublishing: Bool)
    /// The item has ended (published, or failed after `failed`): its group is told.
    func ended(_ key: Key)
}

/// Every port the executor needs, over one `Key`, `Part`, `Job` and `Receipt`.
public protocol ItemPorts: ItemMachinePort, ItemSchedulingPort, ItemTransferPort, ItemSpacePort, ItemPublishPort,
                           ItemEndingPort {}
