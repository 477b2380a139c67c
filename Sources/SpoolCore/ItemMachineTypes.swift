import Foundation
import SpoolRequest
import SpoolScheduler

// The item machine's inputs and outputs: the policy and context it decides with, the events it
// takes and the effects it returns (see `ItemMachine` for the table that joins them). Every type
// here is plain data: the core imports no adapter, so the shell (SpoolDaemon) turns what its
// adapters report into these facts, and the simulator makes them up from a seed.

/// When a failed attempt is tried again, and when an item gives up.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts before an item fails for good (0: unlimited, bounded by the resource timeout).
    public var maxAttempts: Int
    /// Seconds since the item was first queued after which it is not retried.
    public var resourceTimeout: Double
    public var backoff: Backoff
    /// How long a failed publish waits before it is tried again (an I/O error other than a full
    /// disk, which waits for space instead).
    public var publishRetryDelay: Double = 5
    /// Publish tries an item gets for errors other than a full disk before it fails `publish`:
    /// a publish that keeps failing is a state with an exit, not a loop.
    public var maxPublishTries: Int = 10
    /// How long an item that could not open its files (EMFILE, ENOMEM) waits before it tries again.
    public var shortageRetryDelay: Double = 2
    /// A URL that expires within this many seconds of an item's start is refreshed first
    /// (`--refresh-margin`), when a refresh hook may be asked.
    public var refreshMargin: Double = 60

    public init(maxAttempts: Int, resourceTimeout: Double, backoff: Backoff) {
        self.maxAttempts = maxAttempts
        self.resourceTimeout = resourceTimeout
        self.backoff = backoff
    }
}

/// What an operator asks of an item (`spoolfetch cancel|pause|resume|retry`).
public enum OperatorVerb: String, Sendable, Hashable, CaseIterable {
    case cancel, pause, resume, retry
}

/// Whether a body fits on its filesystem: the space gate's answer, carried by the event.
public enum SpaceAnswer: Sendable, Hashable {
    case fits
    /// Not now: `reason` names the filesystem, its free and the needed bytes.
    case later(reason: String)
    /// Never: the body is larger than the filesystem can ever hold (its size less `min-free`).
    case never(reason: String)
}

/// How a transfer failed, reduced to the facts the machine decides on (the shell maps its
/// transfer layer's failure onto this; the simulator makes them up).
public struct TransferFault: Sendable, Hashable, CustomStringConvertible {
    /// The stable reason code for markers and error files (`http-status`, `connect`, …).
    public var code: String
    /// What the user reads: the status or curl text, the errno.
    public var description: String
    public var httpStatus: Int?
    /// Trying again later may succeed.
    public var isTransient: Bool
    /// The kept part must go (the server will not continue it).
    public var discardsPartial: Bool
    /// This source cannot serve it: ask the next one (404, 410, DNS, TLS verification).
    public var movesToNextSource: Bool
    /// Writing the staging file hit a full disk or quota (ENOSPC, EDQUOT).
    public var diskFull: Bool
    /// The transfer was taken out by the engine (pause, cancel, shutdown).
    public var cancelled: Bool
    /// The body exceeded its limit.
    public var tooLarge: Bool

    public init(code: String, description: String, httpStatus: Int? = nil, isTransient: Bool = false,
                discardsPartial: Bool = false, movesToNextSource: Bool = false, diskFull: Bool = false,
                cancelled: Bool = false, tooLarge: Bool = false) {
        self.code = code; self.description = description; self.httpStatus = httpStatus
        self.isTransient = isTransient; self.discardsPartial = discardsPartial
        self.movesToNextSource = movesToNextSource; self.diskFull = diskFull
        self.cancelled = cancelled; self.tooLarge = tooLarge
    }
}

/// How a transfer ended, reduced to what the machine decides on.
public struct TransferEnd: Sendable, Hashable {
    /// nil when the body is complete.
    public var fault: TransferFault?
    /// The body's sha256 when complete.
    public var sha256: String?
    /// The server's `Retry-After`, in seconds.
    public var retryAfter: Double?
    /// Bytes are kept in the part.
    public var hasPartial: Bool
    /// For a 416 answer to a resume: the server's total equals the kept bytes, whose digest this is.
    public var wholePartialSHA256: String?
    /// The digest the request asks for, if any.
    public var wantedSHA256: String?
    /// Appended to a `too-large` message when the limit came from `expected-bytes` × slack.
    public var tooLargeHint: String?
    /// The server was never reached: name resolution, connect, network or host unreachable, a
    /// TLS handshake cut, a reset before any response byte.
    public var outage: Bool
    /// A 304 to a conditional request (`on-exists: skip-unchanged`): the existing file, still
    /// current, and its marker's path. The item ends published with it; nothing is published.
    public var notModified: UnchangedFile?
    /// A 429 or 503 from a host the scheduler paces (`HostPace`): the item goes back to its
    /// queue without spending an attempt or backing off; the host's pace says when it starts.
    public var pacedRefusal = false
    /// With a full disk: why the body can never fit (its length is larger than the filesystem
    /// can hold at all, less `min-free`), naming the filesystem and the figures.
    public var neverFits: String?

    public init(fault: TransferFault?, sha256: String? = nil, retryAfter: Double? = nil, hasPartial: Bool,
                wholePartialSHA256: String? = nil, wantedSHA256: String? = nil, tooLargeHint: String? = nil,
                outage: Bool = false, notModified: UnchangedFile? = nil) {
        self.fault = fault; self.sha256 = sha256; self.retryAfter = retryAfter; self.hasPartial = hasPartial
        self.wholePartialSHA256 = wholePartialSHA256; self.wantedSHA256 = wantedSHA256
        self.tooLargeHint = tooLargeHint; self.outage = outage; self.notModified = notModified
    }
}

/// The already published file a 304 confirmed as current.
public struct UnchangedFile: Sendable, Hashable {
    public var file: String
    public var marker: String
    public init(file: String, marker: String) { self.file = file; self.marker = marker }
}

/// What the shell found when it prepared an attempt's start (the item's description read again,
/// its URL's expiry, its credentials file): the machine decides from these whether the transfer
/// starts, its URL is refreshed first, or the item ends without a request.
public struct StartCheck: Sendable, Hashable {
    /// The request file (or the item's lines in it) could not be read: the errno's kind.
    public var loadProblem: StartProblem?
    public var loadMessage: String
    /// When the URL the attempt would ask stops working, if known.
    public var expiresAt: Date?
    /// How that is known (`expires-key`, `s3-sigv4`, … and which URL: a mirror's, the hook's).
    public var expirySource: String
    /// The lines of the item's credentials file (headers, and the SigV4 keys and client
    /// certificate the transfer takes out of them), read for this start only.
    public var credentials: [RequestHeader]
    /// Why the item's credentials file cannot be used (missing, readable by others, …).
    public var credentialsRefused: String?

    public init(loadProblem: StartProblem? = nil, loadMessage: String = "", expiresAt: Date? = nil, expirySource: String = "",
                credentials: [RequestHeader] = [], credentialsRefused: String? = nil) {
        self.loadProblem = loadProblem; self.loadMessage = loadMessage; self.expiresAt = expiresAt
        self.expirySource = expirySource; self.credentials = credentials; self.credentialsRefused = credentialsRefused
    }
}

/// Why a publish failed, as the publisher reported it.
public struct PublishFault: Sendable, Hashable {
    /// The staged data no longer exists.
    public var partGone: Bool
    /// Trying again cannot help (a name that cannot be used, a part that does not verify).
    public var permanent: Bool
    /// ENOSPC or EDQUOT on the final folder (or a copy's target).
    public var diskFull: Bool
    /// With `diskFull`: the body can never fit there (larger than the filesystem less `min-free`).
    public var neverFits: Bool
    /// What failed, with its path, syscall and errno.
    public var message: String

    public init(partGone: Bool = false, permanent: Bool = false, diskFull: Bool = false, neverFits: Bool = false,
                message: String) {
        self.partGone = partGone; self.permanent = permanent; self.diskFull = diskFull
        self.neverFits = neverFits; self.message = message
    }
}

/// Why an attempt could not even start, by the errno of the open that failed.
public enum StartProblem: Sendable, Hashable {
    /// ENOSPC, EDQUOT: wait for space, as a transfer that filled the disk does.
    case diskFull
    /// EMFILE, ENFILE, ENOMEM, ENOBUFS: the process or the machine is short of descriptors or
    /// memory for now. Not the item's fault: it tries again later without using an attempt.
    case shortOfResources
    /// Anything else (permissions, the request file gone): the item fails.
    case other

    public init(errno: Int32?) {
        switch errno {
        case ENOSPC, EDQUOT: self = .diskFull
        case EMFILE, ENFILE, ENOMEM, ENOBUFS: self = .shortOfResources
        default: self = .other
        }
    }
}

/// What the user reads of an item that failed: the code and message the machine chose, the
/// attempts it used, and the facts the shell supplied about its URL and last response.
public struct ItemFailureFacts: Sendable, Hashable {
    public var index: Int
    /// The URL as it may be shown (without its query unless the operator keeps queries).
    public var url: String
    public var name: String
    public var httpStatus: Int?
    public var curlCode: Int?
    public var curlError: String?
    public var finalURL: String?
    public var outageSeconds: Int?
    /// What the shell knows for the cause of a deadline or cancel ending (see `ItemCause`).
    /// Held by reference: the facts (a status look, some 250 bytes) are read once, when the
    /// item fails, and every failed phase carries this struct; inline, their room was taken by
    /// each of 200,000 cancelled items even after it was let go.
    public var cause: ItemCauseFacts? {
        get { causeStorage?.facts }
        set { causeStorage = newValue.map(CauseFactsStorage.init) }
    }
    private var causeStorage: CauseFactsStorage?

    /// The cause facts' one heap copy (immutable, so it is Sendable and compared by value).
    private final class CauseFactsStorage: Sendable, Hashable {
        let facts: ItemCauseFacts
        init(_ facts: ItemCauseFacts) { self.facts = facts }
        static func == (a: CauseFactsStorage, b: CauseFactsStorage) -> Bool { a.facts == b.facts }
        func hash(into hasher: inout Hasher) { hasher.combine(facts) }
    }

    public init(index: Int, url: String, name: String, httpStatus: Int? = nil, curlCode: Int? = nil,
                curlError: String? = nil, finalURL: String? = nil, outageSeconds: Int? = nil) {
        self.index = index; self.url = url; self.name = name; self.httpStatus = httpStatus
        self.curlCode = curlCode; self.curlError = curlError; self.finalURL = finalURL; self.outageSeconds = outageSeconds
    }
}

/// An item's failure, whole: what its `failed` phase holds and what error files list.
public struct ItemFailed: Sendable, Hashable {
    public var code: String
    public var message: String
    public var attempts: Int
    public var facts: ItemFailureFacts
    /// A deadline's or a cancel's ending: what the item waited on or last failed with. Held by
    /// reference, and one copy for the items a `CauseSharing` saw end with equal causes.
    public var cause: ItemCause? {
        get { causeStorage?.cause }
        set { causeStorage = newValue.map(SharedCause.init) }
    }
    var causeStorage: SharedCause?

    public init(code: String, message: String, attempts: Int, facts: ItemFailureFacts) {
        self.code = code; self.message = message; self.attempts = attempts; self.facts = facts
    }
}

/// One cause's heap copy (immutable: Sendable, compared by value).
final class SharedCause: Sendable, Hashable {
    let cause: ItemCause
    init(_ cause: ItemCause) { self.cause = cause }
    static func == (a: SharedCause, b: SharedCause) -> Bool { a === b || a.cause == b.cause }
    func hash(into hasher: inout Hasher) { hasher.combine(cause) }
}

/// Equal causes kept once, for the items one command ends together: a request's cancel ends
/// 200,000 waiting items whose causes are one ("it waited for its earliest start (…)"), and a
/// copy each was 20 MB held until their group ended.
public final class CauseSharing {
    private var known: [ItemCause: SharedCause] = [:]
    public init() {}
    func shared(_ cause: ItemCause) -> SharedCause {
        if let copy = known[cause] { return copy }
        let copy = SharedCause(cause)
        known[cause] = copy
        return copy
    }
}

/// The decision's inputs that are not the item's own: the clock, the stop flag, a random jitter,
/// and the facts a failure record needs, read only if the item fails.
public struct ItemContext {
    public var now: Date
    public var stopping: Bool
    /// A random number in 0...1 for the back-off's jitter (fixed in tests, seeded in simulation).
    public var jitter: Double
    /// A refresh hook is configured and has not been asked in this attempt yet.
    public var canRefreshURL = false
    /// The item has a source (`url` or mirror) that has not failed in this round.
    public var nextSource = false
    /// The item's host has been unreachable for longer than `--mirror-after`.
    public var hostDownLong = false
    /// The item's URL, name and last response, for its failure record: asked for only when the
    /// event fails the item (reading them may re-read the request file).
    public var failureFacts: () -> ItemFailureFacts
    /// Given for items ended together (a request's cancel): their equal causes kept once.
    public var causeSharing: CauseSharing?

    public init(now: Date, stopping: Bool, jitter: Double,
                failureFacts: @escaping () -> ItemFailureFacts = { ItemFailureFacts(index: 0, url: "", name: "") }) {
        self.now = now
        self.stopping = stopping
        self.jitter = jitter
        self.failureFacts = failureFacts
    }
}
