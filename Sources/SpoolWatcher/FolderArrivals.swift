internal import CLinux
import Foundation

/// Names that arrive in a few folders, read from an inotify descriptor of its own: for the
/// command line's long waits (`spoolfetch wait`, `events --follow`), which block until a record
/// lands and must not poll. Independent of libinotifytools' global state (which belongs to the
/// daemon's `DirectoryWatcher`), so a client may hold any number of these.
///
/// Set it up *before* listing the folders: whatever lands after `init` is then reported, and
/// whatever landed before is in the listing — nothing falls between the two.
///
/// One thread calls `next`; `interrupt` may come from any other (hence `@unchecked Sendable`:
/// the only state shared between threads is the eventfd, which the kernel serialises).
public final class FolderArrivals: @unchecked Sendable {
    /// What `next` saw.
    public enum Arrival: Equatable, Sendable {
        /// Names that arrived (`IN_MOVED_TO`, `IN_CLOSE_WRITE`, `IN_CREATE` for a `link`), with
        /// the index of their folder in `folders`.
        case names([(folder: Int, name: String)])
        /// List the folders again: the kernel's queue overflowed (`IN_Q_OVERFLOW`) and names were
        /// lost, or a folder that was missing has appeared (and is watched from now on).
        case listAgain
        /// The deadline passed with nothing arrived.
        case timedOut
        /// `interrupt()` was called.
        case interrupted

        public static func == (a: Arrival, b: Arrival) -> Bool {
            switch (a, b) {
            case (.listAgain, .listAgain), (.timedOut, .timedOut), (.interrupted, .interrupted): return true
            case (.names(let x), .names(let y)):
                return x.count == y.count && zip(x, y).allSatisfy { $0.folder == $1.folder && $0.name == $1.name }
            default: return false
            }
        }
    }

    public let folders: [String]
    private let fd: Int32
    /// Written by `interrupt()` from another thread; polled beside the inotify descriptor.
    private let wakeFD: Int32
    private var folderOfWatch: [Int32: Int] = [:]
    /// Folders that did not exist yet (a spool no daemon has started on), by the watch on their
    /// parent that waits for them to be made.
    private var missingByParentWatch: [Int32: [Int]] = [:]
    private static let mask = UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_CREATE)
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    /// Watches every folder (a missing one from its parent, until it is made); throws naming
    /// the first that cannot be watched.
    public init(folders: [String]) throws(WatcherError) {
        self.folders = folders
        wakeFD = spoolfetch_eventfd()
        guard wakeFD >= 0 else { throw WatcherError(call: "eventfd", path: folders.first ?? "", errno: errno) }
        // IN_CLOEXEC and IN_NONBLOCK are these two flags (inotify(7)).
        fd = inotify_init1(O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            close(wakeFD)
            throw WatcherError(call: "inotify_init1", path: folders.first ?? "", errno: code)
        }
        for (index, folder) in folders.enumerated() {
            var wd = inotify_add_watch(fd, folder, Self.mask)
            if wd >= 0 { folderOfWatch[wd] = index; continue }
            var code = errno
            if code == ENOENT {
                let parent = (folder as NSString).deletingLastPathComponent
                wd = inotify_add_watch(fd, parent, UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_ONLYDIR))
                code = errno
                // Made between the two calls: watch it after all.
                let again = inotify_add_watch(fd, folder, Self.mask)
                if again >= 0 { folderOfWatch[again] = index; continue }
                if wd >= 0 { missingByParentWatch[wd, default: []].append(index); continue }
            }
            close(fd)
            close(wakeFD)
            throw WatcherError(call: "inotify_add_watch", path: folder, errno: code)
        }
    }

    deinit {
        close(fd)
        close(wakeFD)
    }

    /// Ends a `next` that waits now (or the next one) with `interrupted`; safe from any thread.
    public func interrupt() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Blocks until names arrive, `deadline` passes (nil: no deadline) or `interrupt()` is called.
    public func next(until deadline: Date?) -> Arrival {
        while true {
            var count: UInt64 = 0
            if read(wakeFD, &count, 8) == 8 { return .interrupted }
            if let arrival = drain() { return arrival }
            var timeout: Int32 = -1
            if let deadline {
                let remaining = deadline.timeIntervalSinceNow
                if remaining <= 0 { return .timedOut }
                // Rounded up, so a wait never returns just before its deadline.
                timeout = Int32(min(remaining * 1000, 3_600_000).rounded(.up))
            }
            var pfds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            if poll(&pfds, 2, timeout) == 0, deadline != nil, deadline!.timeIntervalSinceNow <= 0 { return .timedOut }
        }
    }

    /// What is queued on the descriptor now; nil when nothing is.
    private func drain() -> Arrival? {
        var names: [(folder: Int, name: String)] = []
        var overflowed = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            guard count > 0 else { break }
            buffer.withUnsafeBytes { raw in
                var offset = 0
                while offset + MemoryLayout<inotify_event>.size <= count {
                    let base = raw.baseAddress!.advanced(by: offset)
                    let wd = base.loadUnaligned(fromByteOffset: 0, as: Int32.self)
                    let mask = base.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
                    let length = Int(base.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
                    let header = MemoryLayout<inotify_event>.size
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 { overflowed = true }
                    if length > 0, let folder = folderOfWatch[wd] {
                        let bytes = UnsafeRawBufferPointer(start: base.advanced(by: header), count: length)
                        let name = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
                        if !name.isEmpty { names.append((folder, name)) }
                    }
                    offset += header + length
                }
            }
        }
        // A missing folder that has been made: watch it, and have it listed.
        for (parent, indexes) in missingByParentWatch {
            let made = indexes.filter { index in
                let wd = inotify_add_watch(fd, folders[index], Self.mask)
                if wd >= 0 { folderOfWatch[wd] = index }
                return wd >= 0
            }
            guard !made.isEmpty else { continue }
            overflowed = true
            missingByParentWatch[parent] = indexes.filter { !made.contains($0) }
            if missingByParentWatch[parent]!.isEmpty {
                missingByParentWatch[parent] = nil
                inotify_rm_watch(fd, parent)
            }
        }
        if overflowed { return .listAgain }
        return names.isEmpty ? nil : .names(names)
    }
}
