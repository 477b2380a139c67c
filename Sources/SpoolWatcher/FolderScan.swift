internal import CLinux
import Foundation

/// Listing and identity of one watched folder, shared by the inotify and the rescan-only modes.
struct FolderScan {
    /// Whether a name in `incoming/` is a request at all: dotfiles and `*.tmp` are a producer's
    /// work in progress and are never read.
    static func isCandidate(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && !name.hasSuffix(".tmp")
    }

    /// The folder's candidate files, leaving out any still open for writing; nil when the
    /// folder cannot be opened.
    static func list(_ folder: String) -> [String]? {
        guard let dir = opendir(folder) else { return nil }
        defer { closedir(dir) }
        let dirFD = dirfd(dir)
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            guard isCandidate(name) else { continue }
            // Only a regular file is opened (for the lease test): anything else (a directory,
            // symlink, FIFO, device) is listed as it is, for the claim to reject unopened.
            var type = Int32(entry.pointee.d_type)
            if type == Int32(DT_UNKNOWN) { type = entryType(name, in: dirFD) }
            if type == Int32(DT_REG) && isOpenForWriting(name, in: dirFD) { continue }
            names.append(name)
        }
        return names
    }

    /// The `d_type` of `name` as `fstatat` (not following a symlink) finds it, for filesystems
    /// whose listings do not say; DT_UNKNOWN when it is gone.
    static func entryType(_ name: String, in dirFD: Int32) -> Int32 {
        var st = stat()
        guard fstatat(dirFD, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return Int32(DT_UNKNOWN) }
        return (st.st_mode & S_IFMT) == S_IFREG ? Int32(DT_REG) : Int32(DT_LNK)
    }

    /// Whether an entry that inotify reported created (`IN_CREATE`) is to be looked at now.
    /// A file created by `open(O_CREAT)` is still being written (its `IN_CLOSE_WRITE` follows),
    /// but one made complete by `link()` (Maildir's delivery: `ln tmp/x incoming/x`) sends no
    /// other event, and neither does a directory, symlink, FIFO or device made there (rejected
    /// by the claim without being opened). A regular file counts as complete when it is not open
    /// for writing and has a body (a creating `open` adds its writer only after the event, while
    /// the file is still empty) or another link.
    static func isCompleteOnCreate(_ name: String, in folder: String) -> Bool {
        let dirFD = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirFD >= 0 else { return false }
        defer { close(dirFD) }
        var st = stat()
        guard fstatat(dirFD, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return true }
        guard st.st_size > 0 || st.st_nlink > 1 else { return false }
        return !isOpenForWriting(name, in: dirFD)
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

    /// Device and inode of a real directory (not a symlink); nil if there is none at `path`.
    static func identity(_ path: String) -> FolderIdentity? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        return FolderIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// Makes sure a real directory exists at `path` again, created with its parent's
    /// permissions (the spool root's, as at start). Returns its identity, or why not.
    static func recreate(_ path: String) -> Result<FolderIdentity, WatcherError> {
        if let existing = identity(path) { return .success(existing) }
        var parent = stat()
        let parentPath = (path as NSString).deletingLastPathComponent
        guard stat(parentPath, &parent) == 0 else {
            return .failure(WatcherError(call: "stat", path: parentPath, errno: errno))
        }
        let mode = parent.st_mode & 0o7777
        if mkdir(path, mode) == 0 {
            _ = chmod(path, mode)          // mkdir applies the umask
        } else if errno != EEXIST {
            return .failure(WatcherError(call: "mkdir", path: path, errno: errno))
        }
        guard let made = identity(path) else {
            return .failure(WatcherError(call: "lstat", path: path, errno: ENOTDIR,
                                         detail: "is not a directory (a symlink or a file took its place)"))
        }
        return .success(made)
    }
}

/// Which directory a path named when it was watched: a folder deleted and re-created, or a
/// share mounted over it, has another identity.
struct FolderIdentity: Equatable {
    let device: UInt64
    let inode: UInt64
}
