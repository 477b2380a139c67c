internal import CInotifyTools
internal import CLinux
import Foundation
import Synchronization

/// Watches `incoming/` (and the control folder) on a dedicated thread and tells the engine
/// which names to look at.
///
/// Two sources of names, usable together or apart:
/// - **inotify** (libinotifytools): instant on a local filesystem. A file counts as arrived when
///   it is closed after writing, moved in, or created complete (hard-linked in, or not a regular
///   file at all, which the claim then rejects). libinotifytools keeps
///   process-global state, waits in `select()` and exposes no file descriptor, so it cannot join
///   the engine's poll loop: it gets a thread of its own, created before libcurl opens any
///   descriptor (select() cannot watch fds ≥ 1024). Only one inotify watcher may exist per process.
/// - **rescans** every `rescanInterval` seconds: a full listing, for a shared filesystem whose
///   other writers (producers or workers on other machines) inotify never sees. With
///   `usesInotify: false` they are the only source, and libinotifytools is not touched.
///
/// **Never blind.** When a watched folder is deleted, moved away or unmounted (`IN_DELETE` or
/// `IN_MOVED_FROM` in its parent, which is watched for just that; its own `IN_DELETE_SELF`,
/// `IN_MOVE_SELF`, `IN_UNMOUNT`, `IN_IGNORED`; or a rescan finds it missing or replaced by
/// another directory), the watcher reports `folderLost`, re-creates the folder where it is
/// missing (with its parent's permissions), watches it again and lists it. Re-creating was
/// chosen over exiting for the service manager to restart us: a daemon is usually downloading
/// other requests at that moment, and a restart would cut them all (they resume, but pay a
/// reconnect and a re-read of the whole spool) to gain nothing a re-watch does not give; the
/// error-level log line makes the event visible all the same. Only when the folder cannot be
/// made again (the spool itself is gone, permission lost) does the watcher report `failed`, and
/// the engine stops.
///
/// Events are copied out of the library's buffer and handed over through `deliver`, which the
/// engine implements as "append to the inbox and wake the transfer loop".
///
/// **Stopping** (`stop()`) removes the watches and closes the inotify descriptor on the watcher's
/// own thread, then reports `stopped`. That close waits for the kernel to retire the watches (an
/// SRCU grace period); done at process exit instead, every `run --once` would pay it on its
/// critical path. After `stopped` another watcher may be started, but its
/// inotify descriptor must again be below 1024 (the daemon starts a rescan-only one instead).
public final class DirectoryWatcher: Sendable {
    public let directory: String
    /// A second folder for command files (`control/`), reported as `.control`.
    public let controlDirectory: String?
    /// Seconds between full listings; nil: none. libinotifytools waits in whole seconds, so with
    /// inotify on a rescan may come up to a second late.
    public let rescanInterval: Double?
    /// false: no inotify at all; names come only from rescans (`rescanInterval` required).
    public let usesInotify: Bool
    /// false: no listing at start (no `listing(initial: true)`); the first names come from the
    /// first event or rescan. For a watcher that takes over from one that already listed.
    public let listsAtStart: Bool
    private let deliver: @Sendable (WatcherEvent) -> Void
    private let stopRequested = Atomic<Bool>(false)

    public init(directory: String, controlDirectory: String? = nil, rescanInterval: Double? = nil,
                usesInotify: Bool = true, listsAtStart: Bool = true,
                deliver: @escaping @Sendable (WatcherEvent) -> Void) {
        self.directory = directory
        self.controlDirectory = controlDirectory
        self.rescanInterval = rescanInterval.flatMap { $0 > 0 ? $0 : nil }
        self.usesInotify = usesInotify
        self.listsAtStart = listsAtStart
        self.deliver = deliver
    }

    /// Whether a name in `incoming/` is a request at all: dotfiles and `*.tmp` are a producer's
    /// work in progress and are never read.
    public static func isCandidate(_ name: String) -> Bool { FolderScan.isCandidate(name) }

    /// Sets up the watches (so nothing that arrives from now on is missed) and then starts the
    /// thread, which first lists what is already there (unless `listsAtStart` is false) and then
    /// waits for events and rescans.
    public func start() throws(WatcherError) {
        var folders = [directory]
        if let controlDirectory { folders.append(controlDirectory) }
        if usesInotify {
            guard inotifytools_initialize() != 0 else {
                throw .init(call: "inotifytools_initialize", path: directory, errno: inotifytools_error())
            }
            for folder in folders {
                guard inotifytools_watch_file(folder, WatchLoop.mask) != 0 else {
                    throw .init(call: "inotify_add_watch", path: folder, errno: inotifytools_error())
                }
            }
            // The daemon holds each folder open, and the kernel reports a folder's own deletion
            // (IN_DELETE_SELF) only once its last reference is gone — never, then. Its removal
            // from the parent (IN_DELETE, IN_MOVED_FROM there) is reported at once.
            for parent in Set(folders.map(WatchLoop.parent(of:))) {
                guard inotifytools_watch_file(parent, WatchLoop.parentMask) != 0 else {
                    throw .init(call: "inotify_add_watch", path: parent, errno: inotifytools_error())
                }
            }
        } else if rescanInterval == nil {
            throw .init(call: "watch", path: directory, errno: EINVAL,
                        detail: "without inotify a rescan interval is needed, or no new request would ever be seen")
        }
        let identities = folders.map { FolderScan.identity($0) }
        let thread = Thread { [self] in
            var loop = WatchLoop(watcher: self, identities: identities)
            loop.run()
            // Failed: the engine stops and the process exits. Rescans alone: nothing to report.
            guard isStopping, usesInotify else { return }
            inotifytools_cleanup()                    // removes the watches, closes the descriptor
            send(.stopped)
        }
        thread.name = "spoolfetch-watcher"
        thread.start()
    }

    /// Ends the thread: with inotify, at once — it is woken by an empty dotfile made and removed
    /// in the watched folder (`control/` when there is one; dotfiles are never read as
    /// requests or commands) — and it removes its watches, closes the descriptor and reports
    /// `stopped`. Without inotify, at the next rescan, and nothing is reported.
    ///
    /// Returns whether `stopped` is on its way: false without inotify, and when the wake-up
    /// file could not be made (then the thread ends at the next event that comes by itself).
    @discardableResult
    public func stop() -> Bool {
        stopRequested.store(true, ordering: .sequentiallyConsistent)
        guard usesInotify else { return false }
        // Why a file and not a signal: an event queued on the inotify descriptor cannot be lost
        // between the thread's look at the flag and its wait, and libinotifytools offers no
        // other way into its select().
        let wake = (controlDirectory ?? directory) + "/.spoolfetch-wake-\(getpid())"
        let fd = open(wake, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return false }
        close(fd)             // IN_CLOSE_WRITE: the thread wakes, sees the flag and ends
        unlink(wake)
        return true
    }

    /// The candidate files in `folder` (as a listing reports them: no dotfiles, `*.tmp` or
    /// files still open for writing); nil when it cannot be opened. For a drain's last look at
    /// `incoming/` and `control/` once its watcher is stopped.
    public static func candidates(in folder: String) -> [String]? { FolderScan.list(folder) }

    fileprivate var isStopping: Bool { stopRequested.load(ordering: .sequentiallyConsistent) }
    fileprivate func send(_ event: WatcherEvent) { deliver(event) }
}

/// The watcher thread's state: which watch descriptors are current, when the next rescan is due.
private struct WatchLoop {
    /// `IN_CREATE` too: a request hard-linked in, and a directory, symlink, FIFO or device made
    /// in `incoming/`, send nothing else (see `FolderScan.isCompleteOnCreate`).
    static let mask = Int32(bitPattern: UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO) | UInt32(IN_CREATE) | UInt32(IN_ONLYDIR)
                                | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF))
    /// On a watched folder's parent: only entries leaving it (and the parent's own end).
    static let parentMask = Int32(bitPattern: UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM) | UInt32(IN_ONLYDIR)
                                      | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF))
    static let lostMask = UInt32(IN_IGNORED) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF) | UInt32(IN_UNMOUNT)

    static func parent(of folder: String) -> String {
        var path = folder
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    let watcher: DirectoryWatcher
    /// Of each folder (incoming, then control) when last watched, to notice a replaced folder.
    var identities: [FolderIdentity?]
    /// Watch descriptors whose folder was lost: their remaining events (the `IN_IGNORED` after
    /// an `IN_DELETE_SELF`, files landing in a moved-away folder) are ignored.
    var retired: Set<Int32> = []
    var nextRescan: Date?

    init(watcher: DirectoryWatcher, identities: [FolderIdentity?]) {
        self.watcher = watcher
        self.identities = identities
    }

    var folders: [String] { [watcher.directory] + (watcher.controlDirectory.map { [$0] } ?? []) }

    mutating func run() {
        if watcher.listsAtStart {
            list(control: true)
            watcher.send(.listing(FolderScan.list(watcher.directory) ?? [], initial: true))
        }
        nextRescan = watcher.rescanInterval.map { Date().addingTimeInterval($0) }
        while !watcher.isStopping {
            if watcher.usesInotify {
                guard waitForEvent() else { return }
            } else if let next = nextRescan {
                let remaining = next.timeIntervalSinceNow
                if remaining > 0 { Thread.sleep(forTimeInterval: remaining) }
            }
            if watcher.isStopping { return }
            if let next = nextRescan, next.timeIntervalSinceNow <= 0 {
                guard rescan() else { return }
                nextRescan = Date().addingTimeInterval(watcher.rescanInterval!)
            }
        }
    }

    /// Waits for and handles one inotify event (or the rescan timer); false when the watcher
    /// cannot go on.
    mutating func waitForEvent() -> Bool {
        let timeout = nextRescan.map { max(1, Int($0.timeIntervalSinceNow.rounded(.up))) } ?? -1
        guard let event = inotifytools_next_event(timeout) else {
            let e = inotifytools_error()
            if e == EINTR || e == 0 { return true }     // a timeout: the rescan is due
            watcher.send(.failed("reading inotify events for \(watcher.directory) failed: \(String(cString: strerror(e))) (errno \(e))"))
            return false
        }
        let mask = event.pointee.mask
        let wd = event.pointee.wd
        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
            // The kernel dropped events. Drain whatever is queued now (the listing covers it)
            // and list once, so a storm of overflows costs one scan, not one per overflow.
            // `inotifytools_next_events(0, 1)`, not `next_event(0)`: libinotifytools 3.22 turns a
            // timeout of 0 in `next_event` into "wait forever", and the drain never ended.
            while inotifytools_next_events(0, 1) != nil {}
            list(control: true)
            watcher.send(.listing(FolderScan.list(watcher.directory) ?? [], initial: false))
            return true
        }
        if retired.contains(wd) { return true }
        guard let path = watchedPath(of: wd) else { return true }
        // `name` is a flexible array member right after the fixed header; Swift does not import it.
        let name = event.pointee.len == 0 ? "" : String(cString: UnsafeRawPointer(event)
            .advanced(by: MemoryLayout<inotify_event>.size).assumingMemoryBound(to: CChar.self))
        if let folder = folders.first(where: { Self.same($0, path) }) {
            if mask & Self.lostMask != 0 {
                retired.insert(wd)
                // A moved-away folder is still watched by the kernel: drop that watch. After a
                // deletion or an unmount the kernel drops it itself.
                if mask & UInt32(IN_MOVE_SELF) != 0 { _ = inotifytools_remove_watch_by_wd(wd) }
                return check(folder, because: Self.describe(mask))
            }
            guard !name.isEmpty, FolderScan.isCandidate(name) else { return true }
            if mask & UInt32(IN_CREATE) != 0 {
                // Commands are written, not linked: only `incoming/` takes a created entry.
                guard folder == watcher.directory, FolderScan.isCompleteOnCreate(name, in: folder) else { return true }
            }
            watcher.send(folder == watcher.controlDirectory ? .control(name) : .arrived(name))
            return true
        }
        // An event on a parent: one of our folders left it, or the parent itself went.
        if mask & Self.lostMask != 0 {
            retired.insert(wd)
            for folder in folders where Self.same(Self.parent(of: folder), path) {
                guard check(folder, because: "went with its parent, which \(Self.describe(mask))") else { return false }
            }
            return true
        }
        for folder in folders where Self.same(Self.parent(of: folder), path) && Self.lastComponent(folder) == name {
            let how = mask & UInt32(IN_DELETE) != 0 ? "was deleted (IN_DELETE in its parent)" : "was moved away (IN_MOVED_FROM in its parent)"
            return check(folder, because: how)
        }
        return true
    }

    /// The path a watch descriptor was set up for, without libinotifytools' trailing slash.
    func watchedPath(of wd: Int32) -> String? {
        guard let raw = inotifytools_filename_from_wd(wd) else { return nil }
        return String(cString: raw)
    }

    static func same(_ a: String, _ b: String) -> Bool { trimmed(a) == trimmed(b) }

    static func trimmed(_ path: String) -> String {
        var p = path
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        return p
    }

    static func lastComponent(_ path: String) -> String {
        String(trimmed(path).split(separator: "/", omittingEmptySubsequences: true).last ?? "")
    }

    /// After a sign of loss: a folder that is missing or another directory than the one
    /// watched is recovered; one that is still the same (a second sign of one loss, already
    /// handled) is only watched again, which is harmless when the watch still exists.
    mutating func check(_ folder: String, because reason: String) -> Bool {
        let now = FolderScan.identity(folder)
        if let now, let i = folders.firstIndex(of: folder), now == identities[i] {
            if watcher.usesInotify { _ = inotifytools_watch_file(folder, Self.mask) }
            return true
        }
        return recover(folder, because: reason)
    }

    /// Lists every folder; a folder found missing or replaced since it was watched is
    /// recovered first (inotify on a network filesystem does not see another machine remove it).
    mutating func rescan() -> Bool {
        for (i, folder) in folders.enumerated() {
            let now = FolderScan.identity(folder)
            if now == nil || now != identities[i] {
                let why = now == nil ? "is missing" : "was replaced by another directory"
                guard recover(folder, because: "a rescan found that it \(why)") else { return false }
            }
        }
        list(control: true)
        watcher.send(.rescanned(FolderScan.list(watcher.directory) ?? []))
        return true
    }

    /// Reports the loss, re-creates the folder if needed, watches it again and lists it.
    mutating func recover(_ folder: String, because reason: String) -> Bool {
        // Made again before it is reported, so the engine's re-open finds the new folder.
        let identity: FolderIdentity
        let recreated = FolderScan.recreate(folder)
        watcher.send(.folderLost(folder: folder, reason: "the watched folder \(folder) \(reason)"))
        switch recreated {
        case .success(let made): identity = made
        case .failure(let error):
            watcher.send(.failed("the watched folder \(folder) was lost and could not be made again: \(error)"))
            return false
        }
        if let i = folders.firstIndex(of: folder) { identities[i] = identity }
        if watcher.usesInotify && inotifytools_watch_file(folder, Self.mask) == 0 {
            let e = inotifytools_error()
            watcher.send(.failed("could not watch \(folder) again: \(String(cString: strerror(e))) (errno \(e))"))
            return false
        }
        if folder == watcher.controlDirectory {
            list(control: true)
        } else {
            watcher.send(.rescanned(FolderScan.list(folder) ?? []))
        }
        return true
    }

    func list(control: Bool) {
        guard control, let folder = watcher.controlDirectory else { return }
        for name in FolderScan.list(folder) ?? [] { watcher.send(.control(name)) }
    }

    static func describe(_ mask: UInt32) -> String {
        if mask & UInt32(IN_DELETE_SELF) != 0 { return "was deleted (IN_DELETE_SELF)" }
        if mask & UInt32(IN_MOVE_SELF) != 0 { return "was moved away (IN_MOVE_SELF)" }
        if mask & UInt32(IN_UNMOUNT) != 0 { return "was unmounted (IN_UNMOUNT)" }
        return "is no longer watched (IN_IGNORED)"
    }
}

/// Waits for a file to appear, with a deadline, on inotify (for the command line's short waits,
/// such as a control command's answer). Independent of libinotifytools' global state.
public enum FileAppearance {
    /// True when `name` exists in `directory` before `timeout` seconds pass.
    public static func wait(for name: String, in directory: String, timeout: Double) -> Bool {
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { return false }
        defer { close(fd) }
        _ = inotify_add_watch(fd, directory, UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_CREATE))
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            if access(directory + "/" + name, F_OK) == 0 { return true }
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return false }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, Int32(remaining * 1000) + 1)
            _ = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        }
    }
}
