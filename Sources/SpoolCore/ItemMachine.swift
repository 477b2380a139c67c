import Foundation
import SpoolRequest

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
/// | running | transferEnded | 304 to a conditional request (`skip-unchanged`) | published (the existing file, with the event's receipt) | releaseSlot, ended |
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
/// | publishing | publishSucceeded | | published (with the event's receipt) | ended |
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
public struct ItemMachine<Part, Job, Receipt> {
    public typealias Effect = ItemEffect<Part, Job>
    public typealias Event = ItemEvent<Part, Job, Receipt>
    /// The phase with the data that belongs to it, so that the data ends with the phase: a
    /// running item's open part, a publishing item's job. Nothing is cleared by hand when a
    /// phase ends; the next phase simply does not hold it (a part's descriptor closes with it).
    /// Large payloads are boxed (`indirect`), so that a waiting item's record stays one small
    /// malloc chunk.
    public enum State {
        case queued
        /// `part`: the shell's running attempt, from when the shell opened it (`partOpened`);
        /// none before that. In the daemon (`RunningAttempt`) the staging file the transfer
        /// writes (none for an upload) and the attempt's own data (a conditional request's
        /// marker, its rate samples), which end with the phase.
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
        /// `receipt`: the shell's record of the published file (the daemon's: the facts a
        /// `markers: group` marker lists and hooks read), as the event that ended it carried it;
        /// nil when the shell keeps none. Boxed with the rest: an ended item's phase stays one
        /// pointer in its record.
        indirect case published(file: String, marker: String, receipt: Receipt?)
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
            case .published(let file, let marker, _): .published(file: file, marker: marker)
            case .failed(let failure): .failed(failure)
            }
        }

        /// The published file's record, which a published phase keeps.
        public var receipt: Receipt? {
            if case .published(_, _, let receipt) = self { return receipt }
            return nil
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
        /// Published before: `receipt` as `publishSucceeded`'s (nil when the shell keeps none).
        case published(file: String, marker: String, receipt: Receipt? = nil)
        case failed(ItemFailed)
    }

    /// Set only by the machine's own files (this one and its `ItemMachine+…` extensions).
    public internal(set) var state: State = .queued
    public var phase: ItemPhase { state.phase }
    /// Attempts that counted: a full disk or an outage does not use one up.
    public internal(set) var attempts: Int
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
        case .published(let file, let marker, let receipt): state = .published(file: file, marker: marker, receipt: receipt)
        case .failed(let failure): state = .failed(failure)
        }
    }

    /// Applies `event`; returns what the shell must do (empty: nothing changed).
    public mutating func handle(_ event: Event, policy: RetryPolicy, context: ItemContext) -> [Effect] {
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

        case (.running(let part), .preempted):
            state = .queued
            return [.stopTransfer(part: part), .saveResumeState(part: part)]

        case (.running(let part), .transferEnded(let end, let receipt)):
            return transferEnded(end, receipt: receipt, part: part, policy: policy, context: context)

        case (.waitingForSpace, .spaceAvailable):
            state = .queued
            return [.schedule]

        case (.publishing(_, let tries, let cancelAsked), .publishQueued(let job)):
            state = .publishing(job: job, tries: tries, cancelAsked: cancelAsked)
            return []

        case (.publishing, .publishSucceeded(let file, let marker, let receipt)):
            state = .published(file: file, marker: marker, receipt: receipt)
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
            return [.retryPublish(at: context.now.addingTimeInterval(policy.publishRetryDelay), job: job)]

        case (.waitingToPublish(let job, let tries, _), .spaceAvailable):
            state = .publishing(job: job, tries: tries, cancelAsked: nil)
            return [.retryPublish(at: context.now, job: job)]

        case (.publishing(_, _, let cancelAsked?), .publishWithdrawn):
            return fail(cancelAsked, cancelAsked == "cancelled" ? "cancelled by the operator" : Self.deadlineMessage, context)

        case (_, .operatorCommand(let verb)):
            return operatorCommand(verb, code: "cancelled", message: "cancelled by the operator", context: context)

        case (.running(let part), .deadlinePassed):
            // Cut, with what it fetched kept for a retry: a deadline says "not now", not "never".
            return [.stopTransfer(part: part), .saveResumeState(part: part), .keepPartialForRetry, .releaseSlot]
                + fail("deadline", Self.deadlineMessage, context)

        case (_, .deadlinePassed):
            return operatorCommand(.cancel, code: "deadline", message: Self.deadlineMessage, context: context)

        case (.running(let part), .stop):
            state = .queued
            return [.stopTransfer(part: part), .saveResumeState(part: part)]

        case (.queued, .sourceUnreachable), (.retrying, .sourceUnreachable):
            guard context.nextSource else { return [] }
            state = .queued
            return [.unschedule, .nextSource(part: nil), .schedule]

        case (.queued, .deadlineCheck), (.retrying, .deadlineCheck):
            guard context.now.timeIntervalSince(firstQueued) >= policy.resourceTimeout else { return [] }
            return [.unschedule] + fail("timeout", "its host could not be reached (resource timeout reached)", context)

        default:
            return []
        }
    }

    static var deadlineMessage: String { "its deadline passed before it ended" }
}
