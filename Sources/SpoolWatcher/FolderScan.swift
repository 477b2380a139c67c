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
            if isOpenForWriting(name, in: dirFD) { continue }
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
