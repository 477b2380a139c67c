import Foundation

/// This worker's presence on a spool that several workers may share, and the rule that two
/// start-ups never overlap. Two lock files in `staging/`, each with one question:
///
/// - `.workers.lock`: every live worker holds a shared `flock` on it for its whole life. A worker
///   that can take it exclusively for a moment (a probe, released at once) knows no other worker
///   is alive.
/// - `.startup.lock`: held exclusively for the length of one worker's start-up, then unlocked.
///   A worker that starts meanwhile waits for it.
///
/// Start-up clean-up (sweeping temp files, running group hooks an earlier run did not get to)
/// is only safe for what a *dead* worker left: started alone, every temp file is a leftover;
/// otherwise another worker may be halfway through writing one, and only old ones are swept.
/// Two start-ups must not overlap: a second worker could adopt a dead worker's request while the
/// first, started alone and finding nothing left to adopt, removed the dead worker's journals as
/// spent; the second held them in memory only, and if it died too, the next restart fetched
/// every item they recorded again.
///
/// No lock is ever converted (exclusive to shared): a distributed lock manager need not wake a
/// waiter on a conversion (GlusterFS does not: a second worker waited until the first exited);
/// and a waiter asks again now and then instead of blocking (see `FileLock`).
///
/// Neither lock is trusted alone: on a filesystem whose locks are granted per machine (GPFS, NFS
/// without a lock manager, bindfs without lock forwarding) both may grant every worker at once.
/// So `alone` is only believed together with a look at the leases in `active/`
/// (`SpoolStore.noOtherWorkerAlive`), and the start-up lock only makes the race of two start-ups
/// at the same instant rarer (see ARCHITECTURE "Locks"). Claims are kept by each worker's lease
/// and folder (see `WorkerFolder`, `WorkerLease`), never by these locks.
public final class WorkerRegistration: @unchecked Sendable {
    /// No other worker held the spool when this one started.
    public let alone: Bool
    /// `.workers.lock`, held shared for this worker's life.
    private let presenceFD: Int32
    /// `.startup.lock`, held exclusively until `endStartUp`; -1 after.
    private var startUpFD: Int32

    public static let fileName = ".workers.lock"
    public static let startUpFileName = ".startup.lock"

    public init(layout: SpoolLayout) throws(StoreError) {
        let staging = layout.staging
        let startUp = try Self.open(Self.startUpFileName, in: staging)
        do throws(StoreError) {
            try Self.lock(startUp, LOCK_EX, Self.startUpFileName, in: staging)
            let presence = try Self.open(Self.fileName, in: staging)
            let probe = openat(staging.fd, Self.fileName, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            guard probe >= 0 else { let e = StoreError("open", staging.path(of: Self.fileName)); close(presence); throw e }
            // Exclusive only if no live worker holds it shared. No worker can start meanwhile
            // (the start-up lock is this worker's), so the answer holds until the shared lock
            // below is taken.
            alone = flock(probe, LOCK_EX | LOCK_NB) == 0
            close(probe)
            do throws(StoreError) { try Self.lock(presence, LOCK_SH, Self.fileName, in: staging) } catch { close(presence); throw error }
            presenceFD = presence
            startUpFD = startUp
        } catch {
            close(startUp)
            throw error
        }
    }

    /// Ends the start-up phase: from here on the registration only says "alive", and other
    /// workers may start beside this one.
    public func endStartUp() {
        guard startUpFD >= 0 else { return }
        _ = flock(startUpFD, LOCK_UN)
        close(startUpFD)
        startUpFD = -1
    }

    deinit {
        endStartUp()
        close(presenceFD)
    }

    private static func open(_ name: String, in staging: Directory) throws(StoreError) -> Int32 {
        let fd = staging.openShared(name)
        guard fd >= 0 else { throw StoreError("open", staging.path(of: name)) }
        return fd
    }

    /// Takes the lock, waiting while another worker holds it (see `FileLock`: start-ups are
    /// short, so the wait costs a few polls at most).
    private static func lock(_ fd: Int32, _ operation: Int32, _ name: String, in staging: Directory) throws(StoreError) {
        try FileLock.acquire(fd, operation, in: staging, path: staging.path(of: name), first: 0.01)
    }
}
