internal import CLinux
import Foundation
import Synchronization

/// An open directory: the owner of its descriptor, used for every `*at` call so that a path
/// component swapped for a symlink after start cannot redirect the daemon's writes.
public final class Directory: @unchecked Sendable {
    public let path: String
    private let descriptor: Atomic<Int32>
    /// Descriptors replaced by `reopen`, closed only at deinit: another thread may be in the
    /// middle of a call with one.
    private let retired = Mutex<[Int32]>([])
    /// The rename method once known (probed, or learned from the first no-replace rename).
    private let knownRenameMethod = Mutex<RenameMethod?>(nil)

    public var fd: Int32 { descriptor.load(ordering: .acquiring) }

    /// A folder the caller may pass through but not read (a producer and `staging/` after
    /// `spoolfetch init`) is opened `O_PATH`: the client's layout still opens, and a call that
    /// needs the folder fails then, with EACCES, as it would by path.
    public init(opening path: String) throws(StoreError) {
        var fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 && errno == EACCES { fd = open(path, SPOOLFETCH_O_PATH | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw StoreError("open", path) }
        self.path = path
        self.descriptor = Atomic(fd)
        syncMethod = SyncMethod.of(fd: fd)
    }

    deinit {
        close(descriptor.load(ordering: .acquiring))
        for old in retired.withLock({ $0 }) { close(old) }
    }

    /// Opens `path` again (never through a symlink) after the folder there was replaced — deleted
    /// and re-created, or mounted over — so later calls reach the folder that now has the name,
    /// not the gone one the old descriptor still points at.
    public func reopen() throws(StoreError) {
        let fresh = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fresh >= 0 else { throw StoreError("open", path) }
        let old = descriptor.exchange(fresh, ordering: .acquiringAndReleasing)
        retired.withLock { $0.append(old) }
    }

    /// Opens `parent/name`, refusing a symlink in its place (O_NOFOLLOW).
    public init(in parent: Directory, name: String) throws(StoreError) {
        let fd = openat(parent.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError("open", parent.path(of: name)) }
        self.path = parent.path(of: name)
        self.descriptor = Atomic(fd)
        syncMethod = SyncMethod.of(fd: fd)
    }

    /// How renames out of this folder avoid replacing a taken name. Probed with a throw-away file
    /// the first time it is asked (the engine asks at start, to log it once); a folder never
    /// asked learns it from its first no-replace rename instead.
    public var renameMethod: RenameMethod {
        if let known = knownRenameMethod.withLock({ $0 }) { return known }
        guard let probed = RenameProbe.run(in: self) else { return .renameNoReplace }
        knownRenameMethod.withLock { $0 = probed }
        return probed
    }

    /// Pins the rename method (tests exercise the link+unlink path on a local disk this way).
    func setRenameMethod(_ method: RenameMethod) {
        knownRenameMethod.withLock { $0 = method }
    }

    /// How data written in this folder is made durable: `syncfs` only on filesystems known to
    /// honour it (see `SyncMethod`), else `fdatasync` per file.
    public let syncMethod: SyncMethod

    public func path(of name: String) -> String { path + "/" + name }

    public func exists(_ name: String) -> Bool {
        var st = stat()
        return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// Opens `name`, creating it when missing, for a file every worker on the spool shares (a
    /// lock file). Two clients of a network filesystem creating it at the same instant can be
    /// told EEXIST even without `O_EXCL` (GlusterFS turns the create into an exclusive one): the
    /// file is there then, and opening it again succeeds. Returns -1 with `errno` set on failure.
    func openShared(_ name: String, flags: Int32 = O_RDWR) -> Int32 {
        var fd: Int32 = -1
        for _ in 0 ..< 5 {
            fd = openat(self.fd, name, flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if fd >= 0 || errno != EEXIST { return fd }
        }
        return fd
    }

    /// The file's stat without following a symlink; nil if it does not exist.
    func status(of name: String) -> stat? {
        var st = stat()
        return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st : nil
    }

    /// Writes a small file atomically: `.NAME.tmp` created with O_EXCL|O_NOFOLLOW, then renamed
    /// over `name` (or, with `replace: false`, renamed only if `name` does not exist yet).
    /// With `sync`, the content is `fdatasync`ed before the rename (the folder is the caller's
    /// to sync once its renames are done).
    public func writeAtomically(_ name: String, _ bytes: [UInt8], replace: Bool = true,
                                sync: Bool = false) throws(StoreError) {
        let temp = ".\(name).tmp"
        let f = try createFresh(temp)
        do throws(StoreError) {
            try FileIO.writeAll(f, bytes, path: path(of: temp))
            if sync && fdatasync(f) != 0 { throw StoreError("fdatasync", path(of: temp)) }
        } catch {
            close(f)
            _ = unlinkat(fd, temp, 0)
            throw error
        }
        close(f)
        try rename(temp, to: name, in: self, replace: replace)
    }

    /// Like `writeAtomically` (without its sync), but the file stays open: the descriptor is
    /// returned for the caller to sync (one `syncfs` for a whole batch) and close.
    public func writeAtomicallyKeepingOpen(_ name: String, _ bytes: [UInt8]) throws(StoreError) -> Int32 {
        let temp = ".\(name).tmp"
        let f = try createFresh(temp)
        do throws(StoreError) {
            try FileIO.writeAll(f, bytes, path: path(of: temp))
            try rename(temp, to: name, in: self, replace: true)
        } catch {
            close(f)
            _ = unlinkat(fd, temp, 0)
            throw error
        }
        return f
    }

    /// Like `writeAtomically`, but the file is `flock`ed (exclusively) before it appears under
    /// its name, and stays locked for as long as the returned owner lives. Other workers read a
    /// held lock as "its writer is alive" (see `isLockedByAnother`).
    /// With `sync`, the content is `fdatasync`ed before the rename and this folder fsynced after
    /// it, so the file is durable under its name when this returns.
    public func writeAtomicallyLocked(_ name: String, _ bytes: [UInt8], sync: Bool = false) throws(StoreError) -> HeldLock {
        let temp = ".\(name).tmp"
        let f = try createFresh(temp)
        let held = HeldLock(name: name, fd: f)
        do throws(StoreError) {
            if flock(f, LOCK_EX | LOCK_NB) != 0 { throw StoreError("flock", path(of: temp)) }
            try FileIO.writeAll(f, bytes, path: path(of: temp))
            if sync && fdatasync(f) != 0 { throw StoreError("fdatasync", path(of: temp)) }
            try rename(temp, to: name, in: self, replace: true)
            if sync { try self.sync() }
        } catch {
            _ = unlinkat(fd, temp, 0)
            throw error
        }
        return held
    }

    /// Creates `name` anew (O_CREAT|O_EXCL|O_NOFOLLOW, so a planted symlink is never followed) and
    /// returns its descriptor. Whatever already has that name — a crash's leftover, a planted
    /// link — is removed and the create tried once more; removing only then keeps the usual case
    /// at one system call.
    func createFresh(_ name: String, access: Int32 = O_WRONLY) throws(StoreError) -> Int32 {
        let flags = access | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        var f = openat(fd, name, flags, 0o644)
        if f < 0 && errno == EEXIST {
            _ = unlinkat(fd, name, 0)
            f = openat(fd, name, flags, 0o644)
        }
        guard f >= 0 else { throw StoreError("open", path(of: name)) }
        return f
    }

    /// Takes an exclusive `flock` on an existing `name` (never following a symlink); nil when it
    /// does not exist or another open file holds a lock on it.
    public func lockExisting(_ name: String) -> HeldLock? {
        let f = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard f >= 0 else { return nil }
        guard flock(f, LOCK_EX | LOCK_NB) == 0 else { close(f); return nil }
        return HeldLock(name: name, fd: f)
    }

    /// Whether some open file — another worker's, or another object of this process — holds an
    /// exclusive `flock` on `name`. Probed with a shared lock, so that two workers probing at
    /// once do not mistake each other for the owner.
    public func isLockedByAnother(_ name: String) -> Bool {
        let f = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard f >= 0 else { return false }
        defer { close(f) }
        return flock(f, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }

    /// Renames `name` here to `target` in `other` (same filesystem). Without `replace` the
    /// rename fails with EEXIST rather than overwrite: `renameat2(RENAME_NOREPLACE)`, or, where
    /// the filesystem takes no rename flags (EINVAL/ENOSYS: NFS, most FUSE), `link` + `unlink`
    /// (see `RenameMethod`). Of several callers moving the same file at once, exactly one
    /// succeeds; the others get ENOENT, as from a plain rename whose source is gone.
    public func rename(_ name: String, to target: String, in other: Directory,
                       replace: Bool) throws(StoreError) {
        let what = "\(path(of: name)) → \(other.path(of: target))"
        if replace {
            if renameat(fd, name, other.fd, target) != 0 { throw StoreError("rename", what) }
            return
        }
        switch knownRenameMethod.withLock({ $0 }) {
        case .renameNoReplace?:
            if spoolfetch_renameat2(fd, name, other.fd, target, SPOOLFETCH_RENAME_NOREPLACE) != 0 {
                throw StoreError("renameat2", what)
            }
        case .linkThenUnlink?:
            try linkThenUnlink(name, to: target, in: other, what: what)
        case .unsupported?:
            throw StoreError("renameat2", what, errno: EOPNOTSUPP,
                             detail: "this filesystem has neither rename flags nor hard links, so a rename cannot refuse to overwrite")
        case nil:
            if spoolfetch_renameat2(fd, name, other.fd, target, SPOOLFETCH_RENAME_NOREPLACE) == 0 {
                knownRenameMethod.withLock { $0 = .renameNoReplace }
                return
            }
            let error = StoreError("renameat2", what)
            guard RenameProbe.meansNoFlags(error.errno) else { throw error }
            knownRenameMethod.withLock { $0 = .linkThenUnlink }
            try linkThenUnlink(name, to: target, in: other, what: what)
        }
    }

    /// The no-replace rename where rename takes no flags. `link` is the commit point: it fails
    /// with EEXIST when the name is taken. Then the old name goes. A crash in between leaves the
    /// file under both names; a later move of the same file finds its own inode at the target
    /// and only removes the old name (reporting ENOENT, "moved already").
    private func linkThenUnlink(_ name: String, to target: String, in other: Directory, what: String) throws(StoreError) {
        if linkat(fd, name, other.fd, target, 0) != 0 {
            let error = StoreError("link", what)
            guard error.errno == EEXIST else { throw error }
            // Taken — by another file, or by this very file (another mover won, or a crash
            // stopped a move between its link and its unlink).
            guard let source = status(of: name), let existing = other.status(of: target) else {
                throw status(of: name) == nil ? StoreError("link", what, errno: ENOENT) : error
            }
            guard source.st_ino == existing.st_ino && source.st_dev == existing.st_dev else { throw error }
            _ = unlinkat(fd, name, 0)
            throw StoreError("link", what, errno: ENOENT, detail: "the file was moved there already")
        }
        // ENOENT: a racing mover that found this file at the target removed the old name first.
        if unlinkat(fd, name, 0) != 0 && errno != ENOENT {
            let error = StoreError("unlink", path(of: name))
            _ = unlinkat(other.fd, target, 0)
            throw error
        }
    }

    public func remove(_ name: String) {
        _ = unlinkat(fd, name, 0)
    }

    /// Removes every name (errors ignored, as `remove`). Many go from a few threads at once
    /// (`FewThreads`): where the filesystem discards a removed file's blocks before `unlinkat`
    /// returns (ext4 mounted with `discard` and without a journal, for one), each
    /// removal waits for the device, and from a few threads those waits overlap instead of adding
    /// up at a group's end (Benchmarks/RESULTS.md has the measurement).
    public func removeAll(_ names: [String]) {
        if names.count < Self.removedAlone {
            for name in names { remove(name) }
            return
        }
        FewThreads.forEach(names.count, width: FileSync.width) { i in self.remove(names[i]) }
    }

    /// Fewer removals than this go one after the other: starting threads costs more than it saves.
    static let removedAlone = 8

    /// fsync of the directory itself: makes renames and creations in it durable.
    public func sync() throws(StoreError) {
        if fsync(fd) != 0 { throw StoreError("fsync", path) }
    }

    /// syncfs of the filesystem holding this directory: one call commits a whole batch. Only
    /// durable where `syncMethod` is `.syncfs`; elsewhere it returns 0 and reaches nothing.
    public func syncFilesystem() throws(StoreError) {
        if spoolfetch_syncfs(fd) != 0 { throw StoreError("syncfs", path) }
    }

    /// Names in the directory (excluding `.` and `..`).
    public func list() -> [String] {
        let dupFD = dup(fd)
        guard dupFD >= 0, let dir = fdopendir(dupFD) else { return [] }
        defer { closedir(dir) }
        rewinddir(dir)
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Reads a small file (at most `limit` bytes; more is cut off) without following symlinks.
    public func read(_ name: String, limit: Int = 1 << 20) throws(StoreError) -> [UInt8] {
        let f = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard f >= 0 else { throw StoreError("open", path(of: name)) }
        defer { close(f) }
        return try FileIO.readUpTo(f, limit: limit, path: path(of: name))
    }

    /// Free bytes for an unprivileged writer on this directory's filesystem; nil when unknown —
    /// statvfs failed, or the filesystem reports 0 total blocks (many FUSE filesystems: `df`
    /// shows zeros there, which means "not told", not "full").
    public func freeBytes() -> Int64? { spaceFigures()?.free }

    /// The most an unprivileged writer could ever have free on this directory's filesystem: its
    /// size less the blocks reserved for root. nil when unknown (see `freeBytes`).
    public func capacityBytes() -> Int64? { spaceFigures()?.capacity }

    /// `freeBytes` and `capacityBytes` from one `fstatvfs`: the space gate wants both at every
    /// start.
    public func spaceFigures() -> (free: Int64, capacity: Int64)? {
        var s = statvfs()
        guard fstatvfs(fd, &s) == 0, s.f_blocks > 0 else { return nil }
        let unit = Int64(max(s.f_frsize, 1))
        let reserved = s.f_bfree >= s.f_bavail ? s.f_bfree - s.f_bavail : 0
        let usable = s.f_blocks >= reserved ? s.f_blocks - reserved : 0
        return (Int64(s.f_bavail) * unit, Int64(clamping: usable) * unit)
    }

    /// The filesystem this directory is on, for messages an operator acts on: its type and
    /// mount point from `/proc/self/mountinfo` (`tmpfs at /srv/final`); the device number when
    /// the table cannot be read.
    public func filesystemDescription() -> String {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return "unknown filesystem" }
        // glibc's major()/minor() are macros, which Swift does not import.
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~UInt64(0xfff))
        let minor = (dev & 0xff) | ((dev >> 12) & ~UInt64(0xff))
        let device = "\(major):\(minor)"
        if let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) {
            // `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - TYPE SOURCE SUPEROPTIONS`; the
            // last match is the mount on top.
            var found: String?
            for line in table.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count > 5, fields[2] == device, let dash = fields.firstIndex(of: "-"),
                      dash + 1 < fields.count else { continue }
                let mountPoint = fields[4].replacingOccurrences(of: "\\040", with: " ")
                found = "\(fields[dash + 1]) at \(mountPoint)"
            }
            if let found { return found }
        }
        return "device \(device)"
    }

    /// Whether this filesystem tells its free space (see `freeBytes`). Where it does not, disk
    /// space cannot be reserved ahead; a full disk still shows as ENOSPC on write.
    public var spaceIsKnown: Bool {
        var s = statvfs()
        return fstatvfs(fd, &s) == 0 && s.f_blocks > 0
    }

    /// The filesystem id, to tell whether two folders share one (renames work only within one).
    public func deviceID() -> UInt64? {
        var st = stat()
        return fstat(fd, &st) == 0 ? UInt64(st.st_dev) : nil
    }
}
