import Foundation

/// What the watcher tells the engine. Names only: the engine claims by rename, so a name that
/// was already taken (by this or another daemon) simply fails to claim, and a name delivered
/// twice (by an event and a listing) costs nothing.
public enum WatcherEvent: Sendable, Equatable {
    /// A request file finished arriving (`IN_CLOSE_WRITE`, `IN_MOVED_TO`, or `IN_CREATE` of a
    /// hard link or of something that is not a regular file).
    case arrived(String)
    /// A full listing of the folder: at start and after the kernel's event queue overflowed.
    /// Files still open for writing are left out (they arrive later by `IN_CLOSE_WRITE`).
    case listing([String], initial: Bool)
    /// A command file finished arriving in the control folder (or was found by a listing).
    case control(String)
    /// The watcher cannot go on (inotify failed, a lost folder could not be re-created); the
    /// text says why. The engine stops: running blind would leave requests unseen.
    case failed(String)
    /// The periodic listing of `incoming/` (`rescanInterval`: producers on other machines, whose
    /// writes inotify never sees), and the listing that follows `folderLost`. Routine: not
    /// worth a log line above debug.
    case rescanned([String])
    /// A watched folder was deleted, moved away or unmounted (inotify's `IN_DELETE` or
    /// `IN_MOVED_FROM` in its parent, its own `IN_DELETE_SELF`, `IN_MOVE_SELF`, `IN_UNMOUNT`,
    /// `IN_IGNORED`, or a rescan found it missing or replaced).
    /// The watcher has already re-created it where missing and watches it again; its listing
    /// follows (`rescanned` for `incoming/`, `control` names for the control folder). The engine
    /// logs this at error level and re-opens any descriptor it holds on `folder`, which still
    /// points at the old, gone folder.
    case folderLost(folder: String, reason: String)
    /// The thread ended after `DirectoryWatcher.stop()`: with inotify, its watches are removed
    /// and its descriptor closed. Nothing more comes from this watcher.
    case stopped
}

/// The watcher could not be set up.
public struct WatcherError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let path: String
    public let errno: Int32
    /// Set when the failure is a misconfiguration rather than a system call's errno.
    public let detail: String?

    public init(call: String, path: String, errno: Int32, detail: String? = nil) {
        self.call = call
        self.path = path
        self.errno = errno
        self.detail = detail
    }

    public var description: String {
        if let detail { return "\(call) on \(path): \(detail)" }
        return "\(call) on \(path) failed: \(String(cString: strerror(errno))) (errno \(errno))" +
            (errno == ENOSPC ? " — raise fs.inotify.max_user_watches" : "") +
            (errno == EMFILE ? " — raise fs.inotify.max_user_instances" : "")
    }
}
