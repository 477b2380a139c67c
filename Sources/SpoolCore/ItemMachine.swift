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
/// to) and hands back; it never looks into them. Large payloads are boxed (`indirect`): an event
/// is copied at each step, and one as large as a publish job would copy it whole every time.
public enum ItemEvent<Part, Job> {
    /// Queued for the first time, or again after a recovery that starts it over.
    case submitted
    /// The scheduler gave it a slot; `space` is the space gate's answer for its expected size.
    case slotGranted(space: SpaceAnswer)
    /// The shell prepared the attempt's start: what it found (see `StartCheck`).
    indirect case startChecked(StartCheck)
    /// The shell opened the part the running attempt writes.
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
    indirect case transferEnded(TransferEnd)
    /// The space gate found room for it again.
    case spaceAvailable
    /// The shell built the item's publish job and queued it.
    indirect case publishQueued(Job)
    case publishSucceeded(file: String, marker: String)
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
/// (scheduler, transfer driver, space gate, publishing, item endings) carry it out.
public enum ItemEffect: Sendable, Hashable {
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
    /// Take the transfer out of the session, keeping the partial.
    case stopTransfer
    /// Back to the scheduler's timer heap until `at`; `holdHost`: the whole host waits too
    /// (the server asked for a pause with 429/503).
    case retry(at: Date, holdHost: Bool)
    case waitForSpace(reason: String)
    case leaveSpaceQueue
    /// Forget the partial: the next attempt starts from byte 0.
    case discardPartial
    /// Write `B.state` so a restart resumes the partial.
    case saveResumeState
    /// The item fails with its partial and `B.state` kept aside for `spoolfetch retry` to
    /// resume (a deadline cut its transfer): the failure does not remove them.
    case keepPartialForRetry
    /// Build the verified part's publish job and queue it (answered by `publishQueued`).
    case publish(sha256: String)
    /// Give the job to the publisher again at `at` (`waitingToPublish` ends then).
    case retryPublish(at: Date)
    /// Take a cancelled item's job out of the publisher's queue if no batch has it yet
    /// (answered by `publishWithdrawn`); a batch that has it reports as usual.
    case withdrawPublish
    /// The item failed for good (its phase holds the record): write its state, remove its part.
    /// The item has ended.
    case fail(code: String, message: String)
    /// The item is published. The item has ended.
    case ended
    /// Its host could not be reached: hold the whole host (one probe at a time); the item waits
    /// in the queue without using up an attempt.
    case hostUnreachable(error: String)
    /// Run the refresh hook for a new URL; the item keeps its slot meanwhile (`reason`:
    /// `expired`, `expiring`, `http-403`, …).
    case refreshURL(reason: String)
    /// Ask the next source (a mirror, or the first again after all failed once); a partial is
    /// kept only under a strong ETag, which `If-Range` then checks at the new source.
    case nextSource
}

/// One item's phase (with the data that belongs to it) and attempt count, and every rule that
/// moves them: a pure state machine with one entry, `handle`. It takes events and returns
/// effects; it does no I/O and reads no clock.
///
/// The transition table (also in docs/ARCHITECTURE.md; every row has a unit test):
///
/// | phase | event | condition | next phase | actions |
/// |---|---|---|---|---|
/// | new | submitted | | queued | schedule |
/// | queued, retrying | slotGranted | space never fits | failed | releaseSlot, fail(disk-full) |
/// | queued, retrying | slotGranted | no space now | waitingForSpace | releaseSlot, waitForSpace |
/// | queued, retrying | slotGranted | space | running (attempt + 1) | prepareStart |
/// | running | startChecked | its description unreadable | as couldNotStart | as couldNotStart |
/// | running | startChecked | its URL expired or expires within `--refresh-margin`, a refresh hook not yet asked in this attempt | running | refreshURL |
/// | running | startChecked | its URL expired | failed (attempt − 1) | releaseSlot, fail(url-expired) |
/// | running | startChecked | its credentials file unusable | failed (attempt − 1) | releaseSlot, fail(credentials) |
/// | running | startChecked | otherwise | running | startTransfer |
/// | running | partOpened | | running (holding the part) | — |
/// | running | couldNotStart | disk full | waitingForSpace (attempt − 1) | releaseSlot, waitForSpace |
/// | running | couldNotStart | out of descriptors or memory | retrying (attempt − 1) | retry(+2 s) |
/// | running | couldNotStart | other | failed | releaseSlot, fail(staging) |
/// | running | refusedBeforeRequest | (an upload's file gone or changed: `upload-changed`) | failed (attempt − 1) | releaseSlot, fail(code) |
/// | running | transferEnded | 401, 403 or 410, a refresh hook not yet asked in this attempt, not stopping | running | refreshURL |
/// | running | urlRefreshed | | running | prepareStart (same attempt; a partial resumes) |
/// | running | refreshFailed | | failed | releaseSlot, fail(refresh-failed) |
/// | running | transferEnded | 404, 410, DNS, TLS verification, or an outage past `--mirror-after`; a source not failed in this round; not stopping | queued (an outage: attempt − 1) | releaseSlot, nextSource, schedule |
/// | queued, retrying | sourceUnreachable | a source not failed in this round | queued | unschedule, nextSource, schedule |
/// | running | preempted | | queued | stopTransfer, saveResumeState |
/// | running | transferEnded | 304 to a conditional request (`skip-unchanged`) | published (the existing file) | releaseSlot, ended |
/// | running | transferEnded | complete, sha256 matches or none asked | publishing | releaseSlot, publish |
/// | running | transferEnded | complete, sha256 differs | failed | releaseSlot, fail(sha256-mismatch) |
/// | running | transferEnded | 416, the partial is the whole file | publishing | releaseSlot, publish |
/// | running | transferEnded | 416, it is not | retrying | discardPartial, retry(now) |
/// | running | transferEnded | disk full, the body can never fit | failed | releaseSlot, fail(disk-full) |
/// | running | transferEnded | disk full | waitingForSpace (attempt − 1) | releaseSlot, saveResumeState, waitForSpace |
/// | running | transferEnded | outage, time left, not stopping | queued (attempt − 1) | hostUnreachable, saveResumeState |
/// | queued, retrying | deadlineCheck | resource timeout passed | failed | unschedule, fail(timeout) |
/// | running | transferEnded | 429 or 503 from a host the scheduler paces, time left, not stopping | retrying (attempt − 1) | [discardPartial,] retry(now), saveResumeState |
/// | running | transferEnded | transient, attempts and time left, not stopping | retrying | [discardPartial,] retry, saveResumeState |
/// | running | transferEnded | stopping, transient or cancelled | queued | releaseSlot, saveResumeState |
/// | running | transferEnded | otherwise | failed | releaseSlot, fail(code) |
/// | waitingForSpace | spaceAvailable | | queued | schedule |
/// | publishing | publishQueued | | publishing (holding the job) | — |
/// | publishing | publishSucceeded | | published | ended |
/// | publishing | publishFailed | cancel asked meanwhile | failed | fail(cancelled) |
/// | publishing | publishFailed | part gone or permanent | failed | fail(publish) |
/// | publishing | publishFailed | disk full, never fits | failed | fail(disk-full) |
/// | publishing | publishFailed | disk full | waitingToPublish | waitForSpace |
/// | publishing | publishFailed | tries left | publishing (try + 1) | retryPublish(+5 s) |
/// | publishing | publishFailed | no tries left | failed | fail(publish) |
/// | waitingToPublish | spaceAvailable | | publishing | retryPublish(now) |
/// | publishing | publishWithdrawn | cancel asked | failed | fail(cancelled) |
/// | queued, retrying, waitingForSpace, paused | cancel | | failed | unschedule or leaveSpaceQueue, fail(cancelled) |
/// | running | cancel | | failed | stopTransfer, releaseSlot, fail(cancelled) |
/// | publishing | cancel | | publishing (cancel asked) | withdrawPublish |
/// | waitingToPublish | cancel | | failed | leaveSpaceQueue, fail(cancelled) |
/// | running | deadlinePassed | | failed | stopTransfer, saveResumeState, keepPartialForRetry, releaseSlot, fail(deadline) |
/// | any other not ended | deadlinePassed | | failed (as cancel does; a publish in a batch finishes first) | as cancel, fail(deadline) |
/// | queued, retrying | pause | | paused | unschedule |
/// | waitingForSpace | pause | | paused | leaveSpaceQueue |
/// | running | pause | | paused (attempt − 1) | stopTransfer, saveResumeState, releaseSlot |
/// | paused | resume | | queued | schedule |
/// | retrying, waitingForSpace | retry | | queued | unschedule/leaveSpaceQueue, schedule |
/// | waitingToPublish | retry | | publishing | leaveSpaceQueue, retryPublish(now) |
/// | running | stop | | queued | stopTransfer, saveResumeState |
/// | ended | any | | unchanged | — |
///
/// Anything not in the table changes nothing and returns no effect (a control command then
/// answers that the item's state does not allow it).
public struct ItemMachine<Part, Job> {
    /// The phase with the data that belongs to it, so that the data ends with the phase: a
    /// running item's open part, a publishing item's job. Nothing is cleared by hand when a
    /// phase ends; the next phase simply does not hold it (a part's descriptor closes with it).
    /// Large payloads are boxed (`indirect`), so that a waiting item's record stays one small
    /// malloc chunk.
    public enum State {
        case queued
        /// `part`: the staging file the transfer writes, from when the shell opened it
        /// (`partOpened`); none before that, and none for an upload.
        case running(part: Part?)
        /// `until`: when its back-off ends (the `retry` effect's time), which status shows.
        case retrying(until: Date)
        /// `reason`: what is short (the space gate's words), which status shows.
        indirect case waitingForSpace(reason: String)
        case paused
        /// `job`: what the publisher was given (`publishQueued`), kept to try again after a
        /// failed batch; none for an upload, whose records the upload queue writes. `tries`:
        /// failed publishes so far; `cancelAsked`: a cancel (or the deadline) came while a batch
        /// may hold the job, and takes effect when it reports.
        indirect case publishing(job: Job?, tries: Int, cancelAsked: String?)
        /// The job waits for space on the final folder's filesystem; `reason` names it.
        indirect case waitingToPublish(job: Job?, tries: Int, reason: String)
        indirect case published(file: String, marker: String)
        indirect case failed(ItemFailed)

        /// The phase without its data: what the table, status and tests compare.
        public var phase: ItemPhase {
            switch self {
            case .queued: .queued
            case .running: .running
            case .retrying: .retrying
            case .waitingForSpace: .waitingForSpace
            case .paused: .paused
            case .publishing: .publishing
            case .waitingToPublish: .waitingToPublish
            case .published(let file, let marker): .published(file: file, marker: marker)
            case .failed(let failure): .failed(failure)
            }
        }

        /// The open part the phase holds: a running item's.
        public var part: Part? {
            if case .running(let part) = self { return part }
            return nil
        }

        /// The publish job the phase holds.
        public var job: Job? {
            switch self {
            case .publishing(let job, _, _): job
            case .waitingToPublish(let job, _, _): job
            default: nil
            }
        }
    }

    /// Where an adopted item starts, as the recovery plan found it.
    public enum Recovered {
        /// Queued again (a partial, if any, resumed at its start).
        case queued
        /// Its data is staged and verified: straight to the publisher with `job`.
        case publishing(Job)
        case published(file: String, marker: String)
        case failed(ItemFailed)
    }

    public private(set) var state: State = .queued
    public var phase: ItemPhase { state.phase }
    /// Attempts that counted: a full disk or an outage does not use one up.
    public private(set) var attempts: Int
    /// When the item was first queued (the resource timeout counts from here).
    public let firstQueued: Date

    public init(firstQueued: Date, attempts: Int = 0) {
        self.firstQueued = firstQueued
        self.attempts = attempts
    }

    /// An adopted item, where its recovery plan put it, with the attempts its dead worker used.
    public init(recovered: Recovered, firstQueued: Date, attempts: Int) {
        self.firstQueued = firstQueued
        self.attempts = attempts
        switch recovered {
        case .queued: state = .queued
        case .publishing(let job): state = .publishing(job: job, tries: 0, cancelAsked: nil)
        case .published(let file, let marker): state = .published(file: file, marker: marker)
        case .failed(let failure): state = .failed(failure)
        }
    }

    /// Applies `event`; returns what the shell must do (empty: nothing changed).
    public mutating func handle(_ event: ItemEvent<Part, Job>, policy: RetryPolicy, context: ItemContext) -> [ItemEffect] {
        if phase.hasEnded { return [] }
        switch (state, event) {
        case (_, .submitted):
            state = .queued
            return [.schedule]

        case (.queued, .slotGranted(let space)), (.retrying, .slotGranted(let space)):
            switch space {
            case .never(let reason):
                return [.releaseSlot] + fail("disk-full", reason, context)
            case .later(let reason):
                state = .waitingForSpace(reason: reason)
                return [.releaseSlot, .waitForSpace(reason: reason)]
            case .fits:
                state = .running(part: nil)
                attempts += 1
                return [.prepareStart]
            }

        case (.running, .startChecked(let check)):
            if let problem = check.loadProblem { return couldNotStart(problem, check.loadMessage, policy: policy, context: context) }
            if let expires = check.expiresAt, expires <= context.now.addingTimeInterval(policy.refreshMargin) {
                if context.canRefreshURL { return [.refreshURL(reason: expires <= context.now ? "expired" : "expiring")] }
                if expires <= context.now {
                    attempts -= 1
                    return [.releaseSlot] + fail("url-expired", "the URL expired at \(RFC3339.format(expires)) (\(check.expirySource)) "
                                                 + "before the item's turn; no request was sent", context)
                }
            }
            if let why = check.credentialsRefused {
                attempts -= 1
                return [.releaseSlot] + fail("credentials", why, context)
            }
            return [.startTransfer(credentials: check.credentials)]

        case (.running, .partOpened(let part)):
            state = .running(part: part)
            return []

        case (.running, .couldNotStart(let problem, let message)):
            return couldNotStart(problem, message, policy: policy, context: context)

        case (.running, .refusedBeforeRequest(let code, let message)):
            attempts -= 1
            return [.releaseSlot] + fail(code, message, context)

        case (.running, .urlRefreshed):
            return [.prepareStart]

        case (.running, .refreshFailed(let message)):
            return [.releaseSlot] + fail("refresh-failed", message, context)

        case (.running, .preempted):
            state = .queued
            return [.stopTransfer, .saveResumeState]

        case (.running, .transferEnded(let end)):
            return transferEnded(end, policy: policy, context: context)

        case (.waitingForSpace, .spaceAvailable):
            state = .queued
            return [.schedule]

        case (.publishing(_, let tries, let cancelAsked), .publishQueued(let job)):
            state = .publishing(job: job, tries: tries, cancelAsked: cancelAsked)
            return []

        case (.publishing, .publishSucceeded(let file, let marker)):
            state = .published(file: file, marker: marker)
            return [.ended]

        case (.publishing(let held, let tries, let cancelAsked), .publishFailed(let fault, let returned)):
            let job = returned ?? held
            if let code = cancelAsked {
                return fail(code, code == "cancelled" ? "cancelled by the operator" : Self.deadlineMessage, context)
            }
            if fault.partGone || fault.permanent {
                let why = fault.partGone ? "publishing failed and the staged file is gone: "
                                         : "publishing failed and cannot succeed by retrying: "
                return fail("publish", why + fault.message, context)
            }
            if fault.diskFull {
                if fault.neverFits { return fail("disk-full", fault.message, context) }
                state = .waitingToPublish(job: job, tries: tries, reason: fault.message)
                return [.waitForSpace(reason: fault.message)]
            }
            guard tries + 1 < policy.maxPublishTries else {
                return fail("publish", "publishing failed \(tries + 1) times: \(fault.message)", context)
            }
            state = .publishing(job: job, tries: tries + 1, cancelAsked: nil)
            return [.retryPublish(at: context.now.addingTimeInterval(policy.publishRetryDelay))]

        case (.waitingToPublish(let job, let tries, _), .spaceAvailable):
            state = .publishing(job: job, tries: tries, cancelAsked: nil)
            return [.retryPublish(at: context.now)]

        case (.publishing(_, _, let cancelAsked?), .publishWithdrawn):
            return fail(cancelAsked, cancelAsked == "cancelled" ? "cancelled by the operator" : Self.deadlineMessage, context)

        case (_, .operatorCommand(let verb)):
            return operatorCommand(verb, code: "cancelled", message: "cancelled by the operator", context: context)

        case (.running, .deadlinePassed):
            // Cut, with what it fetched kept for a retry: a deadline says "not now", not "never".
            return [.stopTransfer, .saveResumeState, .keepPartialForRetry, .releaseSlot]
                + fail("deadline", Self.deadlineMessage, context)

        case (_, .deadlinePassed):
            return operatorCommand(.cancel, code: "deadline", message: Self.deadlineMessage, context: context)

        case (.running, .stop):
            state = .queued
            return [.stopTransfer, .saveResumeState]

        case (.queued, .sourceUnreachable), (.retrying, .sourceUnreachable):
            guard context.nextSource else { return [] }
            state = .queued
            return [.unschedule, .nextSource, .schedule]

        case (.queued, .deadlineCheck), (.retrying, .deadlineCheck):
            guard context.now.timeIntervalSince(firstQueued) >= policy.resourceTimeout else { return [] }
            return [.unschedule] + fail("timeout", "its host could not be reached (resource timeout reached)", context)

        default:
            return []
        }
    }

    static var deadlineMessage: String { "its deadline passed before it ended" }

    private mutating func couldNotStart(_ problem: StartProblem, _ message: String, policy: RetryPolicy,
                                        context: ItemContext) -> [ItemEffect] {
        switch problem {
        case .diskFull:
            attempts -= 1
            state = .waitingForSpace(reason: message)
            return [.releaseSlot, .waitForSpace(reason: message)]
        case .shortOfResources:
            attempts -= 1
            return retry(at: context.now.addingTimeInterval(policy.shortageRetryDelay), holdHost: false)
        case .other:
            return [.releaseSlot] + fail("staging", "could not prepare the staging file: \(message)", context)
        }
    }

    private mutating func transferEnded(_ end: TransferEnd, policy: RetryPolicy, context: ItemContext) -> [ItemEffect] {
        if let unchanged = end.notModified {
            state = .published(file: unchanged.file, marker: unchanged.marker)
            return [.releaseSlot, .ended]
        }
        // A signed URL refused (expired, revoked): a new one, once per attempt, keeping the slot
        // and the partial; a second refusal right after fails the item as any refusal does.
        if let status = end.fault?.httpStatus, status == 401 || status == 403 || status == 410,
           context.canRefreshURL, !context.stopping {
            return [.refreshURL(reason: "http-\(status)")]
        }
        guard let failure = end.fault else {
            let digest = end.sha256 ?? ""
            if let wanted = end.wantedSHA256, wanted != digest {
                return [.releaseSlot] + fail("sha256-mismatch",
                                             "sha256 of the body is \(digest), the request expects \(wanted)", context)
            }
            state = .publishing(job: nil, tries: 0, cancelAsked: nil)
            return [.releaseSlot, .publish(sha256: digest)]
        }
        // A 416 to a resume: either the partial already is the whole file, or start over.
        if failure.httpStatus == 416, end.hasPartial {
            if let digest = end.wholePartialSHA256 {
                state = .publishing(job: nil, tries: 0, cancelAsked: nil)
                return [.releaseSlot, .publish(sha256: digest)]
            }
            return [.discardPartial] + retry(at: context.now, holdHost: false)
        }
        if failure.diskFull, let why = end.neverFits {
            return [.releaseSlot] + fail("disk-full", why, context)
        }
        if failure.diskFull {
            // A full disk is not the item's fault: keep the partial, wait, do not count the attempt.
            attempts -= 1
            state = .waitingForSpace(reason: "\(failure)")
            return [.releaseSlot, .saveResumeState, .waitForSpace(reason: "\(failure)")]
        }
        // This source cannot serve it (gone, unresolvable, untrusted, or down too long): the next.
        if context.nextSource && !context.stopping && (failure.movesToNextSource || (end.outage && context.hostDownLong)) {
            if end.outage { attempts -= 1 }
            state = .queued
            return [.releaseSlot, .nextSource, .schedule]
        }
        var actions: [ItemEffect] = []
        if failure.discardsPartial { actions.append(.discardPartial) }

        let withinDeadlineForOutage = context.now.timeIntervalSince(firstQueued) < policy.resourceTimeout
        if end.outage && withinDeadlineForOutage && !context.stopping {
            // Not reaching the server is not the item's fault: no attempt is used up, and the
            // whole host waits for its probe (the scheduler puts the item back in its queue).
            attempts -= 1
            state = .queued
            return actions + [.hostUnreachable(error: "\(failure)"), .saveResumeState]
        }

        let withinAttempts = policy.maxAttempts == 0 || attempts < policy.maxAttempts
        let withinDeadline = context.now.timeIntervalSince(firstQueued) < policy.resourceTimeout
        // A host that paces its clients (429/503, see `HostPace`): not the item's fault either.
        if end.pacedRefusal && withinDeadline && !context.stopping {
            attempts -= 1
            return actions + retry(at: context.now, holdHost: false) + [.saveResumeState]
        }
        if failure.isTransient && withinAttempts && withinDeadline && !context.stopping {
            let delay = policy.backoff.delay(afterAttempt: attempts, jitter: context.jitter, retryAfter: end.retryAfter)
            let holdHost = failure.httpStatus == 429 || failure.httpStatus == 503
            return actions + retry(at: context.now.addingTimeInterval(delay), holdHost: holdHost) + [.saveResumeState]
        }
        if context.stopping && (failure.isTransient || failure.cancelled) {
            state = .queued      // picked up by the next run
            return actions + [.releaseSlot, .saveResumeState]
        }
        var message = "\(failure)"
        if failure.isTransient && !withinAttempts { message += " (gave up after \(attempts) attempts)" }
        if failure.isTransient && !withinDeadline { message += " (resource timeout reached)" }
        if failure.tooLarge, let hint = end.tooLargeHint { message += hint }
        return actions + [.releaseSlot] + fail(failure.code, message, context)
    }

    /// An operator's command, and the deadline (which ends the item as `cancel` does, with its
    /// own code).
    private mutating func operatorCommand(_ verb: OperatorVerb, code: String, message: String,
                                          context: ItemContext) -> [ItemEffect] {
        switch (verb, state) {
        case (.cancel, .running):
            return [.stopTransfer, .releaseSlot] + fail(code, message, context)
        case (.cancel, .queued), (.cancel, .retrying), (.cancel, .paused):
            return [.unschedule] + fail(code, message, context)
        case (.cancel, .waitingForSpace):
            return [.leaveSpaceQueue] + fail(code, message, context)
        case (.cancel, .publishing(let job, let tries, nil)):
            state = .publishing(job: job, tries: tries, cancelAsked: code)
            return [.withdrawPublish]
        case (.cancel, .waitingToPublish):
            return [.leaveSpaceQueue] + fail(code, message, context)
        case (.pause, .queued), (.pause, .retrying):
            state = .paused
            return [.unschedule]
        case (.pause, .waitingForSpace):
            state = .paused
            return [.leaveSpaceQueue]
        case (.pause, .running):
            // The operator cut it, not a failure: the attempt it was making is not used up, so
            // pausing and resuming never counts toward `--max-attempts` (the resume makes it again).
            state = .paused
            attempts -= 1
            return [.stopTransfer, .saveResumeState, .releaseSlot]
        case (.resume, .paused):
            state = .queued
            return [.schedule]
        case (.retry, .retrying):
            state = .queued
            return [.unschedule, .schedule]
        case (.retry, .waitingForSpace):
            state = .queued
            return [.leaveSpaceQueue, .schedule]
        case (.retry, .waitingToPublish(let job, let tries, _)):
            state = .publishing(job: job, tries: tries, cancelAsked: nil)
            return [.leaveSpaceQueue, .retryPublish(at: context.now)]
        default:
            return []
        }
    }

    /// Back off until `at`: the phase keeps the time, so that status names it.
    private mutating func retry(at: Date, holdHost: Bool) -> [ItemEffect] {
        state = .retrying(until: at)
        return [.retry(at: at, holdHost: holdHost)]
    }

    /// Ends the item failed, its record whole: the code and message decided here, the attempts
    /// used, and the facts the shell gives about its URL and last response.
    private mutating func fail(_ code: String, _ message: String, _ context: ItemContext) -> [ItemEffect] {
        var failed = ItemFailed(code: code, message: message, attempts: attempts, facts: context.failureFacts())
        if ItemCause.applies(to: code) { failed.cause = cause(facts: failed.facts, shell: failed.facts.cause) }
        // What a cause is decided from is not kept: a failed phase lives until its group ends,
        // and 200,000 copies of an item's status facts cost 50 MB.
        failed.facts.cause = nil
        state = .failed(failed)
        return [.fail(code: code, message: message)]
    }
}
