/// Whether a body has room on the filesystems it is written to, asked before its first byte.
///
/// Why here, in the write callback: the response's headers (`Content-Length`, a range's
/// `Content-Range` total) are the first moment the size is known. Asked after the transfer ended
/// (as it was), a 50 MiB body bound for a 20 MiB folder came down whole before failing; asked
/// here, the transfer is cut before a byte of its body is written. The decision is the caller's
/// (the daemon's space rules, over the filesystems it reads); this type only carries it.
public enum BodyRoomAnswer: Sendable, Hashable {
    case fits
    /// Not now: it waits for space (the reason names the filesystem and its figures).
    case later(String)
    /// Never: larger than a filesystem it must be on can hold at all, less `min-free`.
    case never(String)
}

/// What the transfer layer asks the caller about room for bodies.
public protocol BodyRoomRules: AnyObject {
    /// Whether the body of transfer `key`, `total` bytes in all of which `needed` are not in its
    /// file yet, fits. Asked once per final response with a known size, not for a segment (its
    /// item's first response decided).
    func answer(key: Int, total: Int64, needed: Int64) -> BodyRoomAnswer
    /// What a body of unknown length (transfer `key`) may still write to the staging filesystem
    /// before its free space reaches `min-free`; nil when the filesystem does not say (nothing
    /// is limited then).
    func roomForUnsizedBody(key: Int) -> UnsizedRoom?
}

/// The staging filesystem as a body of unknown length sees it.
public struct UnsizedRoom: Sendable, Hashable {
    /// Bytes free less `min-free` (negative when already below it).
    public var room: Int64
    /// Whether other bodies are being written beside it: what they hold may go (published to
    /// another filesystem, or failed), so running out of room then is "later", not "never".
    public var othersWriting: Bool
    /// The filesystem and its figures, for the message (`PATH (FS): F bytes free of C, M kept free`).
    public var figures: String

    public init(room: Int64, othersWriting: Bool, figures: String) {
        self.room = room; self.othersWriting = othersWriting; self.figures = figures
    }
}

/// The session's link to the caller's `BodyRoomRules` (none: every body fits, as before), and
/// one body's running allowance while its length is unknown.
public final class BodyRoom {
    /// Held strongly: the daemon makes one for the session's whole life.
    public var rules: (any BodyRoomRules)?
    /// A body without a length reads the filesystem again after this many bytes: other bodies
    /// fill it too, so an allowance read once goes stale.
    static let recheckEvery: Int64 = 1 << 20

    public init() {}
}

/// One unsized body's allowance (see `BodyRoom.roomForUnsizedBody`): what it may still write
/// before the free space is read again.
struct UnsizedAllowance {
    var left: Int64
    var sinceRead: Int64 = 0
}

extension Transfer {
    /// Asks the caller's rules whether the final response's body has room, once, before its
    /// first byte is written; false (with `abortReason` set) cuts the transfer there. A body of
    /// unknown length gets an allowance instead (`roomForUnsizedBody`).
    func roomForBody() -> Bool {
        guard let rules = room?.rules, !request.segment, request.upload == nil else { return true }
        let total: Int64?
        let needed: Int64
        switch facts.httpStatus {
        case 206:
            total = facts.rangeTotal
            // A closed range (in front of kept ranges) asks only its own bytes.
            needed = request.rangeEnd == nil ? (total ?? 0) - request.resumeFrom : facts.contentLength ?? 0
        default:
            total = facts.contentLength
            needed = total ?? 0
        }
        guard let total else {
            if let now = rules.roomForUnsizedBody(key: key) { unsized = UnsizedAllowance(left: now.room) }
            return true
        }
        switch rules.answer(key: key, total: total, needed: max(0, needed)) {
        case .fits: return true
        case .later(let why): abortReason = .noRoom(never: false, reason: why)
        case .never(let why): abortReason = .noRoom(never: true, reason: why)
        }
        return false
    }

    /// Whether `count` more bytes of a body of unknown length may be written: the free space is
    /// read again when the allowance runs short or every `BodyRoom.recheckEvery` bytes. Out of
    /// room, the transfer stops before the filesystem goes below `min-free`: "never" when no
    /// other body is being written (its own bytes and what stays there leave no room), else
    /// "later" (it waits for space, as a body that hit a full disk does).
    func roomForUnsizedBody(_ count: Int64) -> Bool {
        guard var allowance = unsized, let rules = room?.rules else { return true }
        if count > allowance.left || allowance.sinceRead >= BodyRoom.recheckEvery {
            guard let now = rules.roomForUnsizedBody(key: key) else { unsized = nil; return true }
            // Bytes handed to the writer thread and not in the file yet are not counted by the
            // filesystem yet: they will be.
            allowance = UnsizedAllowance(left: now.room - max(0, bytesOnDisk - writtenOnDisk))
            if count > allowance.left {
                unsized = allowance
                abortReason = .noRoom(never: !now.othersWriting, reason:
                    "its length is unknown and it reached \(bytesOnDisk) bytes with \(now.figures); "
                    + "stopped there so that the spool does not fill"
                    + (now.othersWriting ? " (other bodies are being written: it waits for space)" : ""))
                return false
            }
        }
        allowance.left -= count
        allowance.sinceRead += count
        unsized = allowance
        return true
    }
}
