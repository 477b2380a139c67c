import Foundation

/// `flock` waits that do not rely on the lock manager to wake the waiter.
///
/// A network filesystem's lock manager may fail to wake a blocked `flock` when the holder lets
/// go (GlusterFS: a waiter missed a conversion from exclusive to shared for good, and under load
/// an unlock now and then), and a worker blocked there would hang for ever. So a waiter asks
/// again with a growing pause instead: uncontended, the first `LOCK_NB` try takes the lock and
/// nothing changes; contended, the wait costs a few polls, since these locks are held briefly.
/// On a local filesystem (the kernel's own locks, which always wake their waiters) the wait is
/// one blocking `flock`.
enum FileLock {
    /// Takes `operation` (`LOCK_EX` or `LOCK_SH`) on `fd` in `folder`, pausing `first` seconds
    /// after a refusal, doubling up to `longest`. With `giveUpAfter`, for a lock that only makes a
    /// race rarer, the wait has an exit: a holder that does not let go (frozen by SIGSTOP, a
    /// paused VM: on GlusterFS its lock reaches every client) is waited for that long at most,
    /// and the caller goes on without the lock. Returns whether the lock is held.
    @discardableResult
    static func acquire(_ fd: Int32, _ operation: Int32, in folder: Directory, path: String,
                        first: Double = 0.001, longest: Double = 0.5, giveUpAfter: Double? = nil) throws(StoreError) -> Bool {
        var waited = 0.0
        if folder.isLocal && giveUpAfter == nil {
            while flock(fd, operation) != 0 {
                if errno != EINTR { throw StoreError("flock", path) }
            }
            return true
        }
        var pause = first
        while flock(fd, operation | LOCK_NB) != 0 {
            switch errno {
            case EINTR: continue
            case EWOULDBLOCK:
                if let limit = giveUpAfter, waited >= limit { return false }
                waited += pause
                var interval = timespec(tv_sec: Int(pause), tv_nsec: Int((pause - pause.rounded(.down)) * 1e9))
                _ = nanosleep(&interval, nil)
                pause = min(pause * 2, longest)
            default: throw StoreError("flock", path)
            }
        }
        return true
    }
}

extension Directory {
    /// Whether the folder is on a local filesystem of this kernel (ext2/3/4, xfs, btrfs, tmpfs:
    /// the types whose `syncfs` is trusted), where `flock` is the kernel's own.
    var isLocal: Bool { syncMethod == .syncfs }
}
