internal import CLinux
import Foundation

/// How a folder moves a file to a name without ever replacing what has that name.
///
/// Every commit point of the spool that must not overwrite (claims, publishing, filing a request)
/// goes through it, so a folder on a filesystem without rename flags keeps the same guarantee.
public enum RenameMethod: String, Sendable, CustomStringConvertible {
    /// `renameat2(RENAME_NOREPLACE)`: one atomic call (local ext4, xfs, btrfs, tmpfs).
    case renameNoReplace = "renameat2(RENAME_NOREPLACE)"
    /// `link` to the new name (fails with EEXIST when it is taken, atomically, also on NFS), then
    /// `unlink` of the old name: Maildir's way, for filesystems whose rename takes no flags (NFS,
    /// most FUSE filesystems answer EINVAL). Between the two calls the file has both names.
    case linkThenUnlink = "link+unlink"
    /// Neither works (a FUSE filesystem without rename flags and without hard links): a rename that
    /// must not replace fails with EOPNOTSUPP rather than risk overwriting. A spool cannot live there.
    case unsupported = "none"

    public var description: String { rawValue }
}

/// How a folder makes written data durable.
public enum SyncMethod: String, Sendable, CustomStringConvertible {
    /// One `syncfs` for a whole batch: only where the filesystem is known to honour it.
    case syncfs
    /// `fdatasync` of every file (several at once, see `FileSync`): everywhere else, because FUSE
    /// and network filesystems answer `syncfs` with 0 without reaching their own cache.
    case fdatasync

    public var description: String { rawValue }

    /// statfs `f_type` of the filesystems whose `syncfs` reaches the disk: ext2/3/4 (0xEF53),
    /// xfs (0x58465342), btrfs (0x9123683E), tmpfs (0x01021994, nothing to reach).
    static let syncfsHonouredBy: Set<Int64> = [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994]

    /// The method for the filesystem holding `fd`; `fdatasync` when its type cannot be read.
    static func of(fd: Int32) -> SyncMethod {
        let type = spoolfetch_filesystem_type(fd)
        return type >= 0 && syncfsHonouredBy.contains(Int64(type)) ? .syncfs : .fdatasync
    }
}

/// Finds the rename method of a folder by trying it on a throw-away file, `.spoolfetch-probe-*.tmp`
/// (a dotfile ending in `.tmp`: ignored by the watcher and consumers, swept at start if a crash
/// leaves it).
enum RenameProbe {
    /// nil when the probe itself could not run (a read-only folder, no permission): the method is
    /// then found on the first real rename.
    static func run(in directory: Directory) -> RenameMethod? {
        let stem = ".spoolfetch-probe-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let first = stem + "-a.tmp", second = stem + "-b.tmp"
        guard let fd = try? directory.createFresh(first) else { return nil }
        close(fd)
        defer {
            directory.remove(first)
            directory.remove(second)
        }
        if spoolfetch_renameat2(directory.fd, first, directory.fd, second, SPOOLFETCH_RENAME_NOREPLACE) == 0 {
            return .renameNoReplace
        }
        guard RenameProbe.meansNoFlags(errno) else { return nil }
        if linkat(directory.fd, first, directory.fd, second, 0) == 0 { return .linkThenUnlink }
        return RenameProbe.meansNoLinks(errno) ? .unsupported : nil
    }

    /// renameat2's answer when the filesystem takes no rename flags.
    static func meansNoFlags(_ e: Int32) -> Bool { e == EINVAL || e == ENOSYS || e == EOPNOTSUPP }

    /// link's answer when the filesystem has no hard links.
    static func meansNoLinks(_ e: Int32) -> Bool { e == EPERM || e == EOPNOTSUPP || e == ENOSYS }
}

extension WorkerLease {
    /// Names the calling thread (here, where the C shim is imported: `WorkerLease.swift`'s public
    /// API uses Glibc types, which an internal import of the shim would hide).
    static func nameThisThread() { _ = spoolfetch_set_thread_name(threadName) }
}
