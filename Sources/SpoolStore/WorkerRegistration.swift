import Foundation

/// This worker's presence on a spool that several workers may share: every live worker holds a
/// shared `flock` on `staging/.workers.lock` for its whole life.
///
/// Start-up clean-up (sweeping temp files, running group hooks an earlier run did not get to)
/// is only safe for what a *dead* worker left. A worker that gets the lock exclusively at start
/// knows no other worker is alive, so every temp file is a leftover; otherwise another worker
/// may be halfway through writing one, and only old ones are swept. Exclusive is then turned
/// into shared (`share`): the kernel converts the `flock`, letting a worker that waits for a
/// shared one in as it does, and nothing of this worker needs protecting once its loop starts.
///
/// A worker that finds the lock held exclusively waits for a shared one: another worker is
/// in its start-up, and two start-ups must not overlap. Without the wait, a second worker could
/// adopt a dead worker's request while the first, started alone and finding nothing left to
/// adopt, removed the dead worker's journals as spent; the second held them in memory only, and
/// if it died too, the next restart fetched every item they recorded again.
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
        let exclusive = flock(fd, LOCK_EX | LOCK_NB) == 0
        if !exclusive {
            // Held shared: workers are running, and this one joins them at once. Held
            // exclusively: one is starting; this waits until its start-up ends (`share`).
            while flock(fd, LOCK_SH) != 0 {
                if errno != EINTR { let e = StoreError("flock", staging.path(of: Self.fileName)); close(fd); throw e }
            }
        }
        self.fd = fd
        alone = exclusive
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
