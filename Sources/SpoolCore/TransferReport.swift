import Foundation

// What `TransferBook` takes in and gives out: plain facts. The daemon makes them from its
// transfer layer's outcome (`TransferOutcome`, `ResponseFacts`); the simulator from its simulated
// servers. `Facts` and `Hash` are the adapter's own (the response's full facts, the running hash
// of the part's bytes): the book never looks into them, it hands them back to its ports.

/// How a transfer ended (or was stopped), as the transfer layer saw it.
public struct TransferReport<Facts, Hash> {
    /// The item's transfer key.
    public var key: Int
    /// nil when the whole body is in the part.
    public var fault: TransferFault?
    /// The final response's status; 0 when none arrived.
    public var status: Int
    /// The body's sha256 when it is whole.
    public var sha256: String?
    /// Bytes in the part in order from byte 0 (what a resume may build on), and their hash.
    public var bytesInOrder: Int64
    public var hash: Hash?
    /// The final response's validators (an error page has its own, a 416 the new version's).
    public var etag: String?
    public var lastModified: String?
    /// `Content-Range`'s total (a 416's `bytes */TOTAL` too), and `Content-Length`.
    public var rangeTotal: Int64?
    public var contentLength: Int64?
    public var retryAfter: Double?
    /// A segmented transfer that stopped without breaking a promise: its ranges past the prefix,
    /// `[from, done, to]` each, as far as they are in the part.
    public var keptRanges: [[Int64]]?
    /// The part holds bytes past `bytesInOrder` that nothing may build on.
    public var partHasMore: Bool
    /// The space rules cut the body for room at its first byte.
    public var noRoom: NoRoom?
    /// The server was never reached.
    public var outage: Bool
    /// The part the transfer wrote is still open (a stop after the item left its running phase
    /// may have none).
    public var partOpen: Bool
    /// The adapter's own facts of the response (the host's answer reads them).
    public var facts: Facts

    // Transparent, as the other plain-data steps of the walk (inlined in debug builds too).
    @_transparent
    public init(key: Int, fault: TransferFault?, status: Int, sha256: String? = nil, bytesInOrder: Int64, hash: Hash?,
                etag: String? = nil, lastModified: String? = nil, rangeTotal: Int64? = nil, contentLength: Int64? = nil,
                retryAfter: Double? = nil, keptRanges: [[Int64]]? = nil, partHasMore: Bool = false, noRoom: NoRoom? = nil,
                outage: Bool = false, partOpen: Bool = true, facts: Facts) {
        self.key = key; self.fault = fault; self.status = status; self.sha256 = sha256
        self.bytesInOrder = bytesInOrder; self.hash = hash; self.etag = etag; self.lastModified = lastModified
        self.rangeTotal = rangeTotal; self.contentLength = contentLength; self.retryAfter = retryAfter
        self.keptRanges = keptRanges; self.partHasMore = partHasMore; self.noRoom = noRoom
        self.outage = outage; self.partOpen = partOpen; self.facts = facts
    }
}

/// The space rules' cut of a body at its first byte (`BodyRoomAnswers`).
public enum NoRoom: Sendable, Hashable {
    /// The body can never fit: why, naming the filesystem and its figures.
    case never(String)
    /// It fits later: the item waits with the size the headers gave.
    case later
}

/// A response's body began.
public struct BodyStart<Facts> {
    public var key: Int
    public var etag: String?
    public var lastModified: String?
    /// `Content-Range`'s total, else `Content-Length` (nil: unknown).
    public var total: Int64?
    /// Where a resume's range began (what was synced before it).
    public var rangeStart: Int64?
    /// The server sent the whole body again: the part's bytes start over.
    public var restartedFromZero: Bool
    public var facts: Facts

    public init(key: Int, etag: String?, lastModified: String?, total: Int64?, rangeStart: Int64?,
                restartedFromZero: Bool, facts: Facts) {
        self.key = key; self.etag = etag; self.lastModified = lastModified; self.total = total
        self.rangeStart = rangeStart; self.restartedFromZero = restartedFromZero; self.facts = facts
    }
}

/// The part's step at a transfer's end or stop: what it keeps for the next start.
public struct PartKeep: Sendable, Hashable {
    /// Bytes in order the part keeps (with the report's hash).
    public var bytes: Int64
    /// The response's validators when its body went into the part (a 200 or 206); nil: the
    /// part keeps its own (an error page's or a 416's must not become the next `If-Range`).
    public var etag: String?
    public var lastModified: String?
    public var adoptsValidators: Bool
    /// A segmented transfer's ranges past the prefix, kept for the next start.
    public var ranges: [[Int64]]?
    /// Bytes past `bytes` are cut off (ranges nothing may build on).
    public var cutBack: Bool

    @_transparent
    public init(bytes: Int64, etag: String? = nil, lastModified: String? = nil, adoptsValidators: Bool = false,
                ranges: [[Int64]]? = nil, cutBack: Bool = false) {
        self.bytes = bytes; self.etag = etag; self.lastModified = lastModified
        self.adoptsValidators = adoptsValidators; self.ranges = ranges; self.cutBack = cutBack
    }
}

extension PartKeep {
    /// What the part keeps of a transfer that ended or stopped: the bytes in order with their
    /// hash; a stopped segmented transfer's ranges (bytes past the prefix otherwise go); the
    /// response's validators only when its body went into the part — a 200 or 206 names the
    /// part's version, an error page's or a 416's validators must not become the next resume's
    /// `If-Range`. `TransferBook`'s rule, a plain-data step (transparent: no call in the walk).
    @_transparent
    public init<Facts, Hash>(_ report: TransferReport<Facts, Hash>) {
        let ofThePart = (report.status == 200 || report.status == 206) && (report.etag != nil || report.lastModified != nil)
        self.init(bytes: report.bytesInOrder, etag: ofThePart ? report.etag : nil,
                  lastModified: ofThePart ? report.lastModified : nil, adoptsValidators: ofThePart)
        if let kept = report.keptRanges, !kept.isEmpty, report.partOpen { ranges = kept }
        else { cutBack = report.partHasMore && report.partOpen }
    }
}

/// What the item holds that a transfer's end is decided with (read after the part's step).
public struct PartHeld: Sendable, Hashable {
    /// The `If-Range` its part's bytes would be resumed with (nil: none).
    public var validator: String?
    /// The request's `sha256:`.
    public var wantedSHA256: String?
    /// The size the request announced (`expected-bytes`).
    public var expectedBytes: Int64?
    /// A `B.state` was written for it; its part has its staging name.
    public var hasStateFile: Bool
    public var partNamed: Bool
    /// A part is open for it.
    public var partOpen: Bool

    @_transparent
    public init(validator: String? = nil, wantedSHA256: String? = nil, expectedBytes: Int64? = nil,
                hasStateFile: Bool = false, partNamed: Bool = false, partOpen: Bool = true) {
        self.validator = validator; self.wantedSHA256 = wantedSHA256
        self.expectedBytes = expectedBytes; self.hasStateFile = hasStateFile; self.partNamed = partNamed
        self.partOpen = partOpen
    }
}

/// Whether an answer to a resume's `If-Range: sent` is of another version than the part: the
/// response's validator of the same kind differs (a server that ignores `If-Range` answers a
/// 206 or 416 about the new version). The transfer layer's `validatorContradicting` asks the
/// same of a 206 as its body begins; the book asks it of a 416, which has no body.
public func answerContradicts(sent: String?, etag: String?, lastModified: String?) -> Bool {
    guard let sent else { return false }
    let isETag = sent.hasPrefix("\"") || sent.hasPrefix("W/")
    guard let own = isETag ? etag : lastModified else { return false }
    return own != sent
}
