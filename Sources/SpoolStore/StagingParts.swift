internal import CLinux
import Foundation

/// Items' parts in `staging/`: created (named, or unnamed where `UnnamedPartSupport` allows),
/// named when worth resuming, reopened to resume, removed.
extension SpoolStore {
    /// Opens `B.part` for writing. `fresh`: any old part is removed and a new one created with
    /// O_EXCL (the "item running" commit point); else an existing part is reopened to resume.
    /// `unnamed` (with `fresh`): the new part starts without a name where the filesystems allow
    /// it (see `UnnamedPartSupport`); the caller names it (`name(_:)`) once it is worth resuming.
    /// Only for an item that has no part on disk: an old `B.part` is not looked for.
    public func openPart(_ base: String, fresh: Bool, unnamed: Bool = false) throws(StoreError) -> StagingFile {
        let name = base + ".part"
        let fd: Int32
        var named = true
        if fresh && unnamed && layout.unnamedParts.isSupported(in: layout) {
            fd = spoolfetch_open_unnamed(layout.staging.fd)
            guard fd >= 0 else { throw StoreError("open(O_TMPFILE)", layout.staging.path) }
            named = false
        } else if fresh {
            fd = try layout.staging.createFresh(name, access: O_RDWR)
        } else {
            fd = openat(layout.staging.fd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_CREAT, 0o644)
            guard fd >= 0 else { throw StoreError("open", layout.staging.path(of: name)) }
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { let e = StoreError("fstat", layout.staging.path(of: name)); close(fd); throw e }
        return StagingFile(base: base, fd: fd, inode: UInt64(st.st_ino), size: Int64(st.st_size), isNamed: named)
    }

    /// Gives an unnamed part its staging name `B.part`, so that a restart finds and resumes it
    /// (nothing to do for a named one). A leftover of that name is replaced: the open part is
    /// the item's bytes.
    public func name(_ part: StagingFile) throws(StoreError) {
        guard !part.isNamed else { return }
        let name = part.base + ".part"
        if spoolfetch_link_open_file(part.fd, layout.staging.fd, name) != 0 {
            guard errno == EEXIST else { throw StoreError("linkat", layout.staging.path(of: name)) }
            layout.staging.remove(name)
            if spoolfetch_link_open_file(part.fd, layout.staging.fd, name) != 0 {
                throw StoreError("linkat", layout.staging.path(of: name))
            }
        }
        part.isNamed = true
    }

    /// Reopens an existing `B.part`; nil when there is none.
    public func openPartIfPresent(_ base: String) throws(StoreError) -> StagingFile? {
        partExists(base) ? try openPart(base, fresh: false) : nil
    }

    public func partExists(_ base: String) -> Bool { layout.staging.exists(base + ".part") }

    /// The full path of an item's part (for messages).
    public func partPath(_ base: String) -> String {
        layout.staging.path(of: base + ".part")
    }

    /// Removes an item's part (it failed, or was cancelled); its state file stays as the record.
    public func removePart(_ base: String) {
        layout.staging.remove(base + ".part")
    }
}

/// An item's open part: `staging/B.part`, or an unnamed file on the staging filesystem until
/// it is worth resuming (see `UnnamedPartSupport`). The owner of its descriptor for the item's
/// whole attempt.
public final class StagingFile: @unchecked Sendable {
    public let base: String
    public let fd: Int32
    public let inode: UInt64
    /// Size when opened (the resumable prefix).
    public let size: Int64
    /// Whether the part has its name `staging/B.part`; false for one created unnamed (see
    /// `UnnamedPartSupport`) until `SpoolStore.name` gives it one. (Changed only by the thread
    /// that holds the part: the engine, or the publisher while a batch has it.)
    public internal(set) var isNamed: Bool

    init(base: String, fd: Int32, inode: UInt64, size: Int64, isNamed: Bool = true) {
        self.base = base
        self.fd = fd
        self.inode = inode
        self.size = size
        self.isNamed = isNamed
    }

    deinit { close(fd) }

    /// Cuts the part back to `length` bytes (a resume that must start over, a bad tail).
    public func truncate(to length: Int64) throws(StoreError) {
        if ftruncate(fd, off_t(length)) != 0 { throw StoreError("ftruncate", base + ".part") }
    }
}
