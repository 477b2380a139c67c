import Foundation

/// This worker's presence on a spool that several workers may share: every live worker holds a
/// shared `flock` on `staging/.workers.lock` for its whole life.
///
/// Start-up clean-up (sweeping temp files, running group hooks an earlier run did not get to)
/// is only safe for what a *dead* worker left. A worker that gets the lock exclusively at start
/// knows no other worker is alive, so every temp file is a leftover; otherwise another worker
/// may be halfway through writing one, and only old ones are swept. Exclusive is then turned
/// into shared: the kernel converts an uncontended `flock` in place, and nothing of this worker
/// needs protecting before its loop starts.
///
/// This is not what keeps claims: a worker's requests are kept by its own lock in `active/W/`
/// (see `WorkerFolder`). One shared lock can say "someone is alive" but not who, so it cannot
/// tell whose requests to adopt; the per-worker locks cannot say "no one else is starting
/// right now" without a scan that races. Each lock answers its own question, one descriptor each.
public final class WorkerRegistration: @unchecked Sendable {
    /// No other worker held the spool when this one started.
    public let alone: Bool
    private let fd: Int32

    public static let fileName = ".workers.lock"

    public init(layout: SpoolLayout) throws(StoreError) {
        let staging = layout.staging
        let fd = openat(staging.fd, Self.fileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError("open", staging.path(of: Self.fileName)) }
        self.fd = fd
        alone = flock(fd, LOCK_EX | LOCK_NB) == 0
    }

    /// Ends the start-up phase: from here on the registration only says "alive", and other
    /// workers may start beside this one.
    public func share() throws(StoreError) {
        while flock(fd, LOCK_SH) != 0 {
            if errno != EINTR { throw StoreError("flock", Self.fileName) }
        }
    }

    deinit { close(fd) }
}
