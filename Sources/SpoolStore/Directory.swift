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

    public var fd: Int32 { descriptor.load(ordering: .acquiring) }

    public init(opening path: String) throws(StoreError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError("open", path) }
        self.path = path
        self.descriptor = Atomic(fd)
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
    }

    public func path(of name: String) -> String { path + "/" + name }

    public func exists(_ name: String) -> Bool {
        var st = stat()
        return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// The file's stat without following a symlink; nil if it does not exist.
    func status(of name: String) -> stat? {
        var st = stat()
        return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st : nil
    }

    /// Writes a small file atomically: `.NAME.tmp` created with O_EXCL|O_NOFOLLOW, then renamed
    /// over `name` (or, with `replace: false`, renamed only if `name` does not exist yet).
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

    /// Like `writeAtomically`, but the file is `flock`ed (exclusively) before it appears under
    /// its name, and stays locked for as long as the returned owner lives. Other workers read a
    /// held lock as "its writer is alive" (see `isLockedByAnother`).
    public func writeAtomicallyLocked(_ name: String, _ bytes: [UInt8]) throws(StoreError) -> HeldLock {
        let temp = ".\(name).tmp"
        let f = try createFresh(temp)
        let held = HeldLock(name: name, fd: f)
        do throws(StoreError) {
            if flock(f, LOCK_EX | LOCK_NB) != 0 { throw StoreError("flock", path(of: temp)) }
            try FileIO.writeAll(f, bytes, path: path(of: temp))
            try rename(temp, to: name, in: self, replace: true)
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
    /// rename fails with EEXIST rather than overwrite (renameat2 RENAME_NOREPLACE).
    public func rename(_ name: String, to target: String, in other: Directory,
                       replace: Bool) throws(StoreError) {
        let r = replace ? renameat(fd, name, other.fd, target)
                        : spoolfetch_renameat2(fd, name, other.fd, target, SPOOLFETCH_RENAME_NOREPLACE)
        if r != 0 { throw StoreError(replace ? "rename" : "renameat2", "\(path(of: name)) → \(other.path(of: target))") }
    }

    public func remove(_ name: String) {
        _ = unlinkat(fd, name, 0)
    }

    /// fsync of the directory itself: makes renames and creations in it durable.
    public func sync() throws(StoreError) {
        if fsync(fd) != 0 { throw StoreError("fsync", path) }
    }

    /// syncfs of the filesystem holding this directory: one call commits a whole batch.
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

    /// Free bytes for an unprivileged writer on this directory's filesystem.
    public func freeBytes() -> Int64? {
        var s = statvfs()
        guard fstatvfs(fd, &s) == 0 else { return nil }
        return Int64(s.f_bavail) * Int64(s.f_frsize)
    }

    /// The filesystem id, to tell whether two folders share one (renames work only within one).
    public func deviceID() -> UInt64? {
        var st = stat()
        return fstat(fd, &st) == 0 ? UInt64(st.st_dev) : nil
    }
}

/// An open file whose `flock` this process holds for as long as the object lives (closing the
/// descriptor in deinit releases it). Used for the files that say "my writer is alive": batch
/// journals, group journals, the workers' registration.
public final class HeldLock: @unchecked Sendable {
    /// The file's name in its folder.
    public let name: String
    let fd: Int32

    init(name: String, fd: Int32) {
        self.name = name
        self.fd = fd
    }

    deinit { close(fd) }
}

/// Loops around read/write for short counts and EINTR.
public enum FileIO {
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(StoreError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError("write", path)
            }
            done += n
        }
    }

    public static func readUpTo(_ fd: Int32, limit: Int, path: String) throws(StoreError) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while result.count < limit {
            let want = min(chunk.count, limit - result.count)
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, want) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError("read", path)
            }
            if n == 0 { break }
            result.append(contentsOf: chunk[0..<n])
        }
        return result
    }
}
