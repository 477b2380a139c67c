import Foundation
import SpoolScheduler
import SpoolStore
import SpoolTransfer

// The lifecycle's inputs and outputs: the policy and context it decides with, the events it
// takes and the actions it returns (see `ItemLifecycle` for the table that joins them).

/// When a failed attempt is tried again, and when an item gives up.
struct RetryPolicy: Sendable, Hashable {
    /// Attempts before an item fails for good (0: unlimited, bounded by the resource timeout).
    var maxAttempts: Int
    /// Seconds since the item was first queued after which it is not retried.
    var resourceTimeout: Double
    var backoff: Backoff
    /// How long a failed publish waits before it is tried again (disk full, I/O error).
    var publishRetryDelay: Double = 5
    /// How long an item that could not open its files (EMFILE, ENOMEM) waits before it tries again.
    var shortageRetryDelay: Double = 2
}

/// What happened to an item: the inputs of `ItemLifecycle`.
enum ItemEvent: Equatable {
    /// Queued for the first time, or again after a recovery that starts it over.
    case submitted
    /// The scheduler gave it a slot; `spaceAvailable` is the space gate's answer.
    case slotGranted(spaceAvailable: Bool)
    /// The request file or the staging file could not be opened for the attempt.
    case couldNotStart(StartProblem, message: String)
    /// At its turn the item cannot be asked for (its URL's known expiry has passed and no
    /// refresh is possible: `url-expired`; its credentials file is unusable: `credentials`): no
    /// request is sent and no attempt used.
    case refusedBeforeRequest(code: String, message: String)
    /// At its turn its URL has expired or expires within `--refresh-margin`, and a refresh hook
    /// may give a new one (`reason`: `expired` or `expiring`).
    case urlNeedsRefresh(reason: String)
    /// The refresh hook gave a new URL (now the item's).
    case urlRefreshed
    /// The refresh hook gave no usable URL.
    case refreshFailed(message: String)
    /// Its host, held by an outage, has been unreachable for longer than `--mirror-after`.
    case sourceUnreachable
    /// The scheduler took its slot for a higher-priority item.
    case preempted
    case transferEnded(TransferEnd)
    /// The space gate found room for it again.
    case spaceAvailable
    case publishSucceeded(file: String, marker: String)
    /// `partGone`: the staged data no longer exists; `permanent`: trying again cannot help.
    case publishFailed(partGone: Bool, permanent: Bool, message: String)
    case operatorCommand(ControlCommand.Verb)
    /// The daemon is stopping (SIGTERM/SIGINT): keep what can be resumed, start nothing.
    case stop
    /// Checked while its host is unreachable: the item may have outlived `--resource-timeout`.
    case deadlineCheck
}

/// Why an attempt could not even start, by the errno of the open that failed.
enum StartProblem: Equatable {
    /// ENOSPC, EDQUOT: wait for space, as a transfer that filled the disk does.
    case diskFull
    /// EMFILE, ENFILE, ENOMEM, ENOBUFS: the process or the machine is short of descriptors or
    /// memory for now. Not the item's fault: it tries again later without using an attempt.
    case shortOfResources
    /// Anything else (permissions, the request file gone): the item fails.
    case other

    init(errno: Int32?) {
        switch errno {
        case ENOSPC, EDQUOT: self = .diskFull
        case EMFILE, ENFILE, ENOMEM, ENOBUFS: self = .shortOfResources
        default: self = .other
        }
    }
}

/// How a transfer ended, reduced to what the lifecycle decides on.
struct TransferEnd: Equatable {
    /// nil when the body is complete.
    var failure: TransferFailure?
    /// The body's sha256 when complete.
    var sha256: String?
    /// The server's `Retry-After`, in seconds.
    var retryAfter: Double?
    /// Bytes are kept in the part.
    var hasPartial: Bool
    /// For a 416 answer to a resume: the server's total equals the kept bytes, whose digest this is.
    var wholePartialSHA256: String?
    /// The digest the request asks for, if any.
    var wantedSHA256: String?
    /// Appended to a `too-large` message when the limit came from `expected-bytes` × slack.
    var tooLargeHint: String?
    /// The server was never reached (`TransferFailureKind.outage`): name resolution, connect,
    /// network or host unreachable, a TLS handshake cut, a reset before any response byte.
    var outage = false
    /// A 304 to a conditional request (`on-exists: skip-unchanged`): the existing file, still
    /// current, and its marker's path. The item ends published with it; nothing is published.
    var notModified: UnchangedFile?
    /// A 429 or 503 from a host the scheduler paces (`HostPace`): the item goes back to its
    /// queue without spending an attempt or backing off; the host's pace says when it starts.
    var pacedRefusal = false
}

/// The already published file a 304 confirmed as current.
struct UnchangedFile: Equatable {
    var file: String
    var marker: String
}

/// The decision's inputs that are not the item's own: the clock, the stop flag, a random jitter.
struct LifecycleContext {
    var now: Date
    var stopping: Bool
    /// A random number in 0...1 for the back-off's jitter (fixed in tests).
    var jitter: Double
    /// A refresh hook is configured and has not been asked in this attempt yet.
    var canRefreshURL = false
    /// The item has a source (`url` or mirror) that has not failed in this round.
    var nextSource = false
    /// The item's host has been unreachable for longer than `--mirror-after`.
    var hostDownLong = false
}

/// The jitter of the engine's lifecycle contexts: SplitMix64, seeded once from the system
/// generator. A back-off jitter needs spread, not secrecy, and every item event asks for one;
/// the system generator costs a `getrandom` call each time. Engine thread only.
struct JitterSource {
    private var state = UInt64.random(in: 0 ... .max)

    /// The next number in 0..<1.
    mutating func next() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(UInt64(1) << 53)
    }
}

/// What the engine must do for an item after an event. The lifecycle decides; the engine's parts
/// (scheduler, transfer driver, space gate, publish pipeline, item endings) carry it out.
enum ItemAction: Equatable {
    /// Submit to the scheduler.
    case schedule
    /// Take out of the scheduler (queued or in its timer heap).
    case unschedule
    /// The scheduler's running slot is free again.
    case releaseSlot
    /// Open the part and start the transfer (resuming when the part and validators allow).
    case startTransfer
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
    /// Hand the verified part to the publisher.
    case publish(sha256: String)
    case retryPublish(at: Date)
    /// The item failed for good: record why, remove its part. The item has ended.
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

