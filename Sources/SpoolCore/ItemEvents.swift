import Foundation
import SpoolRequest

/// Where an item is in its life: the in-memory side of the spool's state table.
public enum ItemPhase: Sendable, Hashable {
    /// In the scheduler: waiting for a slot, its earliest start or the window.
    case queued
    case running
    /// In the scheduler's timer heap until its back-off has passed.
    case retrying
    /// Waiting for free disk space, its partial kept; looked at on a timer.
    case waitingForSpace
    /// Paused by the operator (`spoolfetch pause`); the partial is kept until `resume`.
    case paused
    /// Verified and with the publisher (queued for a batch, or in one).
    case publishing
    /// Verified; its publish hit a full disk: waiting for space on the final folder's filesystem.
    case waitingToPublish
    /// Not boxed, unlike `failed`: every ended item's phase is read several times (table, status,
    /// group end), and two strings cost less to copy than a box to allocate each time.
    case published(file: String, marker: String)
    indirect case failed(ItemFailed)

    public var hasEnded: Bool {
        switch self { case .published, .failed: return true; default: return false }
    }

    /// The state name `spoolfetch status` shows.
    public var label: String {
        switch self {
        case .queued: return "pending"
        case .running: return "running"
        case .retrying: return "retrying"
        case .waitingForSpace: return "waiting-space"
        case .paused: return "paused"
        case .publishing: return "publishing"
        case .waitingToPublish: return "waiting-space"
        case .published: return "done"
        case .failed: return "failed"
        }
    }
}

/// What happened to an item: the inputs of `ItemMachine`. `Part` and `Job` are the shell's
/// open staging file and publish job, which the machine only holds (in the phase they belong
/// to) and hands back; it never looks into them. `Receipt` is the shell's record of a published
/// file (the daemon's: its marker's facts), which the events that end an item published carry
/// and its published phase keeps. Large payloads are boxed (`indirect`): an event is copied at
/// each step, and one as large as a publish job would copy it whole every time.
public enum ItemEvent<Part, Job, Receipt> {
    /// Queued for the first time, or again after a recovery that starts it over.
    case submitted
    /// The scheduler gave it a slot; `space` is the space gate's answer for its expected size.
    case slotGranted(space: SpaceAnswer)
    /// The shell prepared the attempt's start: what it found (see `StartCheck`).
    indirect case startChecked(StartCheck)
    /// The shell opened the part the running attempt writes: its `Part`, which may carry what
    /// the attempt learns besides (the daemon's `RunningAttempt`; an upload's has no file).
    case partOpened(Part)
    /// The request file or the staging file could not be opened for the attempt.
    case couldNotStart(StartProblem, message: String)
    /// At its turn the upload's file cannot be sent (gone, changed: `upload-changed`): no
    /// request is sent and no attempt used.
    case refusedBeforeRequest(code: String, message: String)
    /// The refresh hook gave a new URL (now the item's).
    case urlRefreshed
    /// The refresh hook gave no usable URL.
    case refreshFailed(message: String)
    /// Its host, held by an outage, has been unreachable for longer than `--mirror-after`.
    case sourceUnreachable
    /// The scheduler took its slot for a higher-priority item.
    case preempted
    /// `receipt`: for a 304 that ends the item (`TransferEnd.notModified`), the existing
    /// file's record, which its published phase keeps; nil otherwise, or when the shell keeps none.
    indirect case transferEnded(TransferEnd, receipt: Receipt? = nil)
    /// The space gate found room for it again.
    case spaceAvailable
    /// The shell built the item's publish job and queued it.
    indirect case publishQueued(Job)
    /// The batch published it as `file` with its marker at `marker` (empty under `markers:
    /// group`); `receipt`: the published file's record, which its published phase keeps (nil when
    /// the shell keeps none: a per-file marker already holds the facts).
    case publishSucceeded(file: String, marker: String, receipt: Receipt? = nil)
    /// The batch failed for this item; `job` comes back with what the batch got done.
    indirect case publishFailed(PublishFault, job: Job?)
    /// The shell took a cancelled item's job out of its queue before any batch had it.
    case publishWithdrawn
    case operatorCommand(OperatorVerb)
    /// The daemon is stopping (SIGTERM/SIGINT): keep what can be resumed, start nothing.
    case stop
    /// Checked while its host is unreachable: the item may have outlived `--resource-timeout`.
    case deadlineCheck
    /// Its request's `deadline:` (or `--deadline`) has passed.
    case deadlinePassed
}

/// What the shell must do for an item after an event. The machine decides; the shell's parts
/// (scheduler, transfer driver, space gate, publishing, item endings) carry it out through
/// `ItemExecutor`'s ports. Each effect carries what carrying it out needs (the part a running
/// phase held, the job a publishing phase holds, the failure record): the executor never reads
/// the machine's state back, so what an effect acts on is what the machine decided with.
public enum ItemEffect<Part, Job> {
    /// Submit to the scheduler.
    case schedule
    /// Take out of the scheduler (queued or in its timer heap).
    case unschedule
    /// The scheduler's running slot is free again.
    case releaseSlot
    /// Read the item's description, its URL's expiry and its credentials for this attempt
    /// (answered by `startChecked`).
    case prepareStart
    /// Open the part and start the transfer (resuming when the part and validators allow), with
    /// the credentials' header lines read for it.
    case startTransfer(credentials: [RequestHeader])
    /// Take the transfer out of the session, keeping the partial; `part`: the one the running
    /// phase held (none before `partOpened`, none for an upload).
    case stopTransfer(part: Part? = nil)
    /// Back to the scheduler's timer heap until `at`; `holdHost`: the whole host waits too
    /// (the server asked for a pause with 429/503).
    case retry(at: Date, holdHost: Bool)
    case waitForSpace(reason: String)
    case leaveSpaceQueue
    /// Forget the partial: the next attempt starts from byte 0.
    case discardPartial
    /// Write `B.state` so a restart resumes the partial; `part`: the one the running phase held.
    case saveResumeState(part: Part? = nil)
    /// The item fails with its partial and `B.state` kept aside for `spoolfetch retry` to
    /// resume (a deadline cut its transfer): the failure does not remove them.
    case keepPartialForRetry
    /// Build the verified part's publish job and queue it (answered by `publishQueued`); `part`:
    /// the verified one the running phase held.
    case publish(sha256: String, part: Part? = nil)
    /// Give the job to the publisher again at `at` (`waitingToPublish` ends then); `job`: the
    /// one the publishing phase holds (none for an upload).
    case retryPublish(at: Date, job: Job? = nil)
    /// Take a cancelled item's job out of the publisher's queue if no batch has it yet
    /// (answered by `publishWithdrawn`); a batch that has it reports as usual.
    case withdrawPublish
    /// The item failed for good: write `failure` (what its failed phase holds), remove its part;
    /// `wasPublishing`: it left `publishing` or `waitingToPublish`, whose job the publisher
    /// drops. The item has ended.
    indirect case fail(ItemFailed, wasPublishing: Bool)
    /// The item is published. The item has ended.
    case ended
    /// Its host could not be reached: hold the whole host (one probe at a time); the item waits
    /// in the queue without using up an attempt.
    case hostUnreachable(error: String)
    /// Run the refresh hook for a new URL; the item keeps its slot meanwhile (`reason`:
    /// `expired`, `expiring`, `http-403`, …).
    case refreshURL(reason: String)
    /// Ask the next source (a mirror, or the first again after all failed once); a partial is
    /// kept only under a strong ETag, which `If-Range` then checks at the new source. `part`:
    /// the one the running phase held (none from a queue).
    case nextSource(part: Part? = nil)
}

extension ItemEffect: Equatable where Part: Equatable, Job: Equatable {}
extension ItemEffect: Hashable where Part: Hashable, Job: Hashable {}
extension ItemEffect: Sendable where Part: Sendable, Job: Sendable {}

extension ItemEffect {
    /// The failure's code, for a `fail` effect.
    public var failCode: String? {
        if case .fail(let failed, _) = self { return failed.code }
        return nil
    }
}
