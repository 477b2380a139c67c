internal import CInotifyTools
internal import CLinux
import Foundation
import Synchronization

/// What the watcher tells the engine. Names only: the engine claims by rename, so a name that
/// was already taken (by this or another daemon) simply fails to claim.
public enum WatcherEvent: Sendable, Equatable {
    /// A request file finished arriving (`IN_CLOSE_WRITE` or `IN_MOVED_TO`).
    case arrived(String)
    /// A full listing of the folder: at start and after the kernel's event queue overflowed.
    /// Files still open for writing are left out (they arrive later by `IN_CLOSE_WRITE`).
    case listing([String], initial: Bool)
    /// A command file finished arriving in the control folder.
    case control(String)
    /// The watcher cannot go on (the folder vanished, inotify failed); the text says why.
    case failed(String)
}

/// Watches one folder (`incoming/`) with libinotifytools on a dedicated thread.
///
/// libinotifytools keeps process-global state, waits in `select()` and exposes no file
/// descriptor, so it cannot join the engine's poll loop: it gets a thread of its own, created
/// before libcurl opens any descriptor (select() cannot watch fds ≥ 1024). Events are copied
/// out of the library's buffer and handed over through `deliver`, which the engine implements
/// as "append to the inbox and wake the transfer loop". Only one watcher may exist per process.
public final class DirectoryWatcher: Sendable {
    public let directory: String
    /// A second folder for command files (`control/`), reported as `.control`.
    public let controlDirectory: String?
    private let deliver: @Sendable (WatcherEvent) -> Void
    private let controlWD = Mutex<Int32>(-1)

    public init(directory: String, controlDirectory: String? = nil, deliver: @escaping @Sendable (WatcherEvent) -> Void) {
        self.directory = directory
        self.controlDirectory = controlDirectory
        self.deliver = deliver
    }

    /// Whether a name in `incoming/` is a request at all: dotfiles and `*.tmp` are a producer's
    /// work in progress and are never read.
    public static func isCandidate(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && !name.hasSuffix(".tmp")
    }

    /// Sets up the watch (so nothing that arrives from now on is missed) and then starts the
    /// thread, which first lists what is already there and then waits for events.
    public func start() throws(WatcherError) {
        guard inotifytools_initialize() != 0 else {
            throw .init(call: "inotifytools_initialize", path: directory, errno: inotifytools_error())
        }
        let mask = Int32(bitPattern: UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO) | UInt32(IN_ONLYDIR))
        guard inotifytools_watch_file(directory, mask) != 0 else {
            throw .init(call: "inotify_add_watch", path: directory, errno: inotifytools_error())
        }
        if let control = controlDirectory {
            guard inotifytools_watch_file(control, mask) != 0 else {
                throw .init(call: "inotify_add_watch", path: control, errno: inotifytools_error())
            }
            // libinotifytools records a watched folder under its name with a trailing slash.
            var wd = inotifytools_wd_from_filename(control.hasSuffix("/") ? control : control + "/")
            if wd < 0 { wd = inotifytools_wd_from_filename(control) }
            controlWD.withLock { $0 = wd }
        }
        let thread = Thread { [self] in self.run() }
        thread.name = "spoolfetch-watcher"
        thread.start()
    }

    private func run() {
        let controlWD = self.controlWD.withLock { $0 }
        scanControl()
        deliver(.listing(scan(), initial: true))
        while true {
            guard let event = inotifytools_next_event(-1) else {
                let e = inotifytools_error()
                if e == EINTR || e == 0 { continue }
                deliver(.failed("reading inotify events for \(directory) failed: \(String(cString: strerror(e))) (errno \(e))"))
                return
            }
            let mask = event.pointee.mask
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                // The kernel dropped events. Drain whatever is queued now (the listing covers it)
                // and list once, so a storm of overflows costs one scan, not one per overflow.
                while inotifytools_next_event(0) != nil {}
                scanControl()
                deliver(.listing(scan(), initial: false))
                continue
            }
            if mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) != 0 {
                deliver(.failed("the watched folder \(directory) was removed or unmounted"))
                return
            }
            guard event.pointee.len > 0 else { continue }
            // `name` is a flexible array member right after the fixed header; Swift does not import it.
            let namePointer = UnsafeRawPointer(event).advanced(by: MemoryLayout<inotify_event>.size)
                .assumingMemoryBound(to: CChar.self)
            let name = String(cString: namePointer)
            guard Self.isCandidate(name) else { continue }
            deliver(event.pointee.wd == controlWD ? .control(name) : .arrived(name))
        }
    }

    private func scanControl() {
        guard let control = controlDirectory else { return }
        for name in scan(control) { deliver(.control(name)) }
    }

    /// Lists the folder's candidate files, leaving out any still open for writing.
    private func scan(_ folder: String? = nil) -> [String] {
        guard let dir = opendir(folder ?? directory) else { return [] }
        defer { closedir(dir) }
        let dirFD = dirfd(dir)
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            guard Self.isCandidate(name) else { continue }
            if Self.isOpenForWriting(name, in: dirFD) { continue }
            names.append(name)
        }
        return names
    }

    /// A read lease is refused (EAGAIN) while someone holds the file open for writing. Where
    /// leases are not supported (some network filesystems) the file is taken as finished.
    static func isOpenForWriting(_ name: String, in dirFD: Int32) -> Bool {
        let fd = openat(dirFD, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }   // symlinks and vanished files are the engine's business
        defer { close(fd) }
        if spoolfetch_set_lease(fd, Int32(F_RDLCK)) == 0 {
            _ = spoolfetch_set_lease(fd, Int32(F_UNLCK))
            return false
        }
        return errno == EAGAIN
    }
}

/// The watcher could not be set up.
public struct WatcherError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let path: String
    public let errno: Int32
    public var description: String {
        "\(call) on \(path) failed: \(String(cString: strerror(errno))) (errno \(errno))" +
            (errno == ENOSPC ? " — raise fs.inotify.max_user_watches" : "") +
            (errno == EMFILE ? " — raise fs.inotify.max_user_instances" : "")
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
