import Foundation
import SpoolScheduler
import SpoolStore
import SpoolTransfer

/// Where an item is in its life: the in-memory side of the spool's state table.
enum ItemPhase: Equatable {
    /// In the scheduler: waiting for a slot, its earliest start or the window.
    case queued
    case running
    /// In the scheduler's timer heap until its back-off has passed.
    case retrying
    /// Waiting for free disk space, its partial kept; looked at on a timer.
    case waitingForSpace
    /// Paused by the operator (`spoolfetch pause`); the partial is kept until `resume`.
    case paused
    /// Verified and handed to the publisher.
    case publishing
    indirect case published(file: String, marker: String)
    indirect case failed(ItemFailure)

    var hasEnded: Bool {
        switch self { case .published, .failed: return true; default: return false }
    }

    /// The state name `spoolfetch status` shows.
    var label: String {
        switch self {
        case .queued: return "pending"
        case .running: return "running"
        case .retrying: return "retrying"
        case .waitingForSpace: return "waiting-space"
        case .paused: return "paused"
        case .publishing: return "publishing"
        case .published: return "done"
        case .failed: return "failed"
        }
    }
}

/// One item's phase and attempt count, and every rule that moves them: a pure state machine in
/// the style of the scheduler. It takes events and returns actions; it does no I/O.
///
/// The transition table (also in docs/ARCHITECTURE.md; every row has a unit test):
///
/// | phase | event | condition | next phase | actions |
/// |---|---|---|---|---|
/// | new | submitted | | queued | schedule |
/// | queued, retrying | slotGranted | no space | waitingForSpace | releaseSlot, waitForSpace |
/// | queued, retrying | slotGranted | space | running (attempt + 1) | startTransfer |
/// | running | couldNotStart | disk full | waitingForSpace (attempt − 1) | releaseSlot, waitForSpace |
/// | running | couldNotStart | out of descriptors or memory | retrying (attempt − 1) | retry(+2 s) |
/// | running | couldNotStart | other | failed | releaseSlot, fail(staging) |
/// | running | refusedBeforeRequest | (its URL expired: `url-expired`; its credentials unusable: `credentials`) | failed (attempt − 1) | releaseSlot, fail(code) |
/// | running | urlNeedsRefresh | | running | refreshURL |
/// | running | transferEnded | 401, 403 or 410, a refresh hook not yet asked in this attempt, not stopping | running | refreshURL |
/// | running | urlRefreshed | | running | startTransfer (same attempt; a partial resumes) |
/// | running | refreshFailed | | failed | releaseSlot, fail(refresh-failed) |
/// | running | transferEnded | 404, 410, DNS, TLS verification, or an outage past `--mirror-after`; a source not failed in this round; not stopping | queued (an outage: attempt − 1) | releaseSlot, nextSource, schedule |
/// | queued, retrying | sourceUnreachable | a source not failed in this round | queued | unschedule, nextSource, schedule |
/// | running | preempted | | queued | stopTransfer, saveResumeState |
/// | running | transferEnded | 304 to a conditional request (`skip-unchanged`) | published (the existing file) | releaseSlot, ended |
/// | running | transferEnded | complete, sha256 matches or none asked | publishing | releaseSlot, publish |
/// | running | transferEnded | complete, sha256 differs | failed | releaseSlot, fail(sha256-mismatch) |
/// | running | transferEnded | 416, the partial is the whole file | publishing | releaseSlot, publish |
/// | running | transferEnded | 416, it is not | retrying | discardPartial, retry(now) |
/// | running | transferEnded | disk full | waitingForSpace (attempt − 1) | releaseSlot, saveResumeState, waitForSpace |
/// | running | transferEnded | outage, time left, not stopping | queued (attempt − 1) | hostUnreachable, saveResumeState |
/// | queued, retrying | deadlineCheck | resource timeout passed | failed | unschedule, fail(timeout) |
/// | running | transferEnded | transient, attempts and time left, not stopping | retrying | [discardPartial,] retry, saveResumeState |
/// | running | transferEnded | stopping, transient or cancelled | queued | releaseSlot, saveResumeState |
/// | running | transferEnded | otherwise | failed | releaseSlot, fail(code) |
/// | waitingForSpace | spaceAvailable | | queued | schedule |
/// | publishing | publishSucceeded | | published | ended |
/// | publishing | publishFailed | part kept, not permanent | publishing | retryPublish(+5 s) |
/// | publishing | publishFailed | part gone or permanent | failed | fail(publish) |
/// | queued, retrying, waitingForSpace, paused | cancel | | failed | unschedule, leaveSpaceQueue, fail(cancelled) |
/// | running | cancel | | failed | stopTransfer, releaseSlot, fail(cancelled) |
/// | publishing | cancel | | publishing | — (refused: the publisher owns the part) |
/// | queued, retrying | pause | | paused | unschedule |
/// | waitingForSpace | pause | | paused | leaveSpaceQueue |
/// | running | pause | | paused | stopTransfer, saveResumeState, releaseSlot |
/// | paused | resume | | queued | schedule |
/// | retrying, waitingForSpace | retry | | queued | unschedule/leaveSpaceQueue, schedule |
/// | running | stop | | queued | stopTransfer, saveResumeState |
/// | ended | any | | unchanged | — |
///
/// Anything not in the table changes nothing and returns no action (a control command then
/// answers that the item's state does not allow it).
struct ItemLifecycle {
    /// The phase with the data that belongs to it, so that the data ends with the phase: a
    /// running item's open part, a publishing item's job. Nothing is cleared by hand when a
    /// phase ends; the next phase simply does not hold it (a part's descriptor closes with it).
    /// Large payloads are boxed (`indirect`), so that a waiting item's record stays one small
    /// malloc chunk.
    enum State {
        case queued
        /// `part`: the staging file the transfer writes, from when the driver opened it
        /// (`holdPart`); none before that, and none for an upload.
        case running(part: StagingFile?)
        case retrying
        case waitingForSpace
        case paused
        /// `job`: what the publisher was given (`handOver`), kept to try again after a failed
        /// batch; none for an upload, whose records the upload queue writes.
        indirect case publishing(job: PublishJob?)
        indirect case published(file: String, marker: String)
        indirect case failed(ItemFailure)

        /// The phase without its data: what the table, status and tests compare.
        var phase: ItemPhase {
            switch self {
            case .queued: .queued
            case .running: .running
            case .retrying: .retrying
            case .waitingForSpace: .waitingForSpace
            case .paused: .paused
            case .publishing: .publishing
            case .published(let file, let marker): .published(file: file, marker: marker)
            case .failed(let failure): .failed(failure)
            }
        }

        /// The open part the phase holds: a running item's, or the one its publish job carries.
        var part: StagingFile? {
            switch self {
            case .running(let part): part
            case .publishing(let job): job?.part
            default: nil
            }
        }
    }

    private(set) var state: State = .queued
    var phase: ItemPhase { state.phase }
    /// Attempts that counted: a full disk or an outage does not use one up.
    private(set) var attempts: Int
    /// When the item was first queued (the resource timeout counts from here).
    let firstQueued: Date

    init(firstQueued: Date, attempts: Int = 0) {
        self.firstQueued = firstQueued
        self.attempts = attempts
    }

    /// Applies `event`; returns what the engine must do (empty: nothing changed).
    mutating func handle(_ event: ItemEvent, policy: RetryPolicy, context: LifecycleContext) -> [ItemAction] {
        if phase.hasEnded { return [] }
        switch (phase, event) {
        case (_, .submitted):
            state = .queued
            return [.schedule]

        case (.queued, .slotGranted(let space)), (.retrying, .slotGranted(let space)):
            guard space else {
                state = .waitingForSpace
                return [.releaseSlot, .waitForSpace(reason: "not enough free space for its expected size")]
            }
            state = .running(part: nil)
            attempts += 1
            return [.startTransfer]

        case (.running, .couldNotStart(let problem, let message)):
            switch problem {
            case .diskFull:
                attempts -= 1
                state = .waitingForSpace
                return [.releaseSlot, .waitForSpace(reason: message)]
            case .shortOfResources:
                attempts -= 1
                state = .retrying
                return [.retry(at: context.now.addingTimeInterval(policy.shortageRetryDelay), holdHost: false)]
            case .other:
                return [.releaseSlot] + fail("staging", "could not prepare the staging file: \(message)")
            }

        case (.running, .refusedBeforeRequest(let code, let message)):
            attempts -= 1
            return [.releaseSlot] + fail(code, message)

        case (.running, .urlNeedsRefresh(let reason)):
            return [.refreshURL(reason: reason)]

        case (.running, .urlRefreshed):
            return [.startTransfer]

        case (.running, .refreshFailed(let message)):
            return [.releaseSlot] + fail("refresh-failed", message)

        case (.running, .preempted):
            state = .queued
            return [.stopTransfer, .saveResumeState]

        case (.running, .transferEnded(let end)):
            return transferEnded(end, policy: policy, context: context)

        case (.waitingForSpace, .spaceAvailable):
            state = .queued
            return [.schedule]

        case (.publishing, .publishSucceeded(let file, let marker)):
            state = .published(file: file, marker: marker)
            return [.ended]

        case (.publishing, .publishFailed(let partGone, let permanent, let message)):
            if partGone || permanent {
                let why = partGone ? "publishing failed and the staged file is gone: " : "publishing failed and cannot succeed by retrying: "
                return fail("publish", why + message)
            }
            return [.retryPublish(at: context.now.addingTimeInterval(policy.publishRetryDelay))]

        case (_, .operatorCommand(let verb)):
            return operatorCommand(verb)

        case (.running, .stop):
            state = .queued
            return [.stopTransfer, .saveResumeState]

        case (.queued, .sourceUnreachable), (.retrying, .sourceUnreachable):
            guard context.nextSource else { return [] }
            state = .queued
            return [.unschedule, .nextSource, .schedule]

        case (.queued, .deadlineCheck), (.retrying, .deadlineCheck):
            guard context.now.timeIntervalSince(firstQueued) >= policy.resourceTimeout else { return [] }
            return [.unschedule] + fail("timeout", "its host could not be reached (resource timeout reached)")

        default:
            return []
        }
    }

    private mutating func transferEnded(_ end: TransferEnd, policy: RetryPolicy, context: LifecycleContext) -> [ItemAction] {
        if let unchanged = end.notModified {
            state = .published(file: unchanged.file, marker: unchanged.marker)
            return [.releaseSlot, .ended]
        }
        // A signed URL refused (expired, revoked): a new one, once per attempt, keeping the slot
        // and the partial; a second refusal right after fails the item as any refusal does.
        if case .httpStatus(let status)? = end.failure, status == 401 || status == 403 || status == 410,
           context.canRefreshURL, !context.stopping {
            return [.refreshURL(reason: "http-\(status)")]
        }
        guard let failure = end.failure else {
            let digest = end.sha256 ?? ""
            if let wanted = end.wantedSHA256, wanted != digest {
                return [.releaseSlot] + fail("sha256-mismatch",
                                             "sha256 of the body is \(digest), the request expects \(wanted)")
            }
            state = .publishing(job: nil)
            return [.releaseSlot, .publish(sha256: digest)]
        }
        // A 416 to a resume: either the partial already is the whole file, or start over.
        if case .httpStatus(416) = failure, end.hasPartial {
            if let digest = end.wholePartialSHA256 {
                state = .publishing(job: nil)
                return [.releaseSlot, .publish(sha256: digest)]
            }
            state = .retrying
            return [.discardPartial, .retry(at: context.now, holdHost: false)]
        }
        if case .write(let e) = failure, e == ENOSPC || e == EDQUOT {
            // A full disk is not the item's fault: keep the partial, wait, do not count the attempt.
            attempts -= 1
            state = .waitingForSpace
            return [.releaseSlot, .saveResumeState, .waitForSpace(reason: "\(failure)")]
        }
        // This source cannot serve it (gone, unresolvable, untrusted, or down too long): the next.
        if context.nextSource && !context.stopping && (failure.movesToNextSource || (end.outage && context.hostDownLong)) {
            if end.outage { attempts -= 1 }
            state = .queued
            return [.releaseSlot, .nextSource, .schedule]
        }
        var actions: [ItemAction] = []
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
            state = .retrying
            return actions + [.retry(at: context.now, holdHost: false), .saveResumeState]
        }
        if failure.isTransient && withinAttempts && withinDeadline && !context.stopping {
            let delay = policy.backoff.delay(afterAttempt: attempts, jitter: context.jitter, retryAfter: end.retryAfter)
            var holdHost = false
            if case .httpStatus(let status) = failure, status == 429 || status == 503 { holdHost = true }
            state = .retrying
            return actions + [.retry(at: context.now.addingTimeInterval(delay), holdHost: holdHost), .saveResumeState]
        }
        if context.stopping && (failure.isTransient || failure == .cancelled) {
            state = .queued      // picked up by the next run
            return actions + [.releaseSlot, .saveResumeState]
        }
        var message = "\(failure)"
        if failure.isTransient && !withinAttempts { message += " (gave up after \(attempts) attempts)" }
        if failure.isTransient && !withinDeadline { message += " (resource timeout reached)" }
        if case .tooLarge = failure, let hint = end.tooLargeHint { message += hint }
        return actions + [.releaseSlot] + fail(failure.code, message)
    }

    private mutating func operatorCommand(_ verb: ControlCommand.Verb) -> [ItemAction] {
        switch (verb, phase) {
        case (.cancel, .running):
            return [.stopTransfer, .releaseSlot] + fail("cancelled", "cancelled by the operator")
        case (.cancel, .queued), (.cancel, .retrying), (.cancel, .paused):
            return [.unschedule] + fail("cancelled", "cancelled by the operator")
        case (.cancel, .waitingForSpace):
            return [.leaveSpaceQueue] + fail("cancelled", "cancelled by the operator")
        case (.pause, .queued), (.pause, .retrying):
            state = .paused
            return [.unschedule]
        case (.pause, .waitingForSpace):
            state = .paused
            return [.leaveSpaceQueue]
        case (.pause, .running):
            state = .paused
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
        default:
            return []
        }
    }

    private mutating func fail(_ code: String, _ message: String) -> [ItemAction] {
        // The phase becomes `.failed` when the engine has built the failure record (it needs the
        // item's URL, name and last response); until then nothing else may happen to the item.
        state = .failed(ItemFailure(index: -1, url: "", name: "", code: code, message: message, attempts: attempts))
        return [.fail(code: code, message: message)]
    }

    /// Replaces the placeholder failure with the full record the engine built.
    mutating func recordFailure(_ failure: ItemFailure) {
        state = .failed(failure)
    }

    /// An adopted item that the recovery plan ends at once (already published or failed).
    mutating func recovered(as ended: State, attempts: Int) {
        precondition(ended.phase.hasEnded)
        state = ended
        self.attempts = attempts
    }

    /// An adopted item resumes with the attempts the dead worker had used.
    mutating func restoreAttempts(_ attempts: Int) {
        self.attempts = attempts
    }

    /// An adopted item whose data is staged and verified goes straight to the publisher with `job`.
    mutating func recoveredForPublishing(_ job: PublishJob, attempts: Int) {
        state = .publishing(job: job)
        self.attempts = attempts
    }

    // The data a phase holds comes in through these two calls, never an event: they change no
    // phase and decide nothing, they only give the phase what the engine made for it.

    /// The running item's part, once the driver opened it.
    mutating func holdPart(_ part: StagingFile) {
        guard case .running = state else { preconditionFailure("a part for an item that is not running") }
        state = .running(part: part)
    }

    /// The publishing item's job as the publisher has it now (handed to it, or handed back by a
    /// failed batch with what it got done).
    mutating func handOver(_ job: PublishJob) {
        guard case .publishing = state else { preconditionFailure("a publish job for an item that is not publishing") }
        state = .publishing(job: job)
    }
}
