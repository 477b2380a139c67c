internal import CLinux
import Foundation
import Synchronization

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
        // A named part must hold all its bytes: a restart may find it.
        try part.writeUnwritten()
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

/// Body bytes received for a part and not yet written to it, at `offset` (see `StagingFile.unwritten`).
public protocol UnwrittenPartBytes: AnyObject, Sendable {
    var offset: Int64 { get }
    var bytes: [UInt8] { get }
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
    /// Bytes that belong in the part but are not in its file yet: a small body the engine
    /// received whole and left to be written off its thread (`PartWriter`). The part's content
    /// is its file plus these; whoever reads, syncs, names or resumes the part writes them first
    /// (`writeUnwritten`). Guarded by a lock, taken once or twice per item and held for one
    /// `pwrite`: the writer's thread and the publisher's may both try to write them.
    private let pending = Mutex<(any UnwrittenPartBytes)?>(nil)

    /// The bytes not yet written, if any.
    public var unwritten: (any UnwrittenPartBytes)? {
        get { pending.withLock { $0 } }
        set { pending.withLock { $0 = newValue } }
    }

    init(base: String, fd: Int32, inode: UInt64, size: Int64, isNamed: Bool = true) {
        self.base = base
        self.fd = fd
        self.inode = inode
        self.size = size
        self.isNamed = isNamed
    }

    deinit { close(fd) }

    /// Writes `unwritten` into the file; kept, for another try, when that fails.
    public func writeUnwritten() throws(StoreError) {
        let failed: Int32? = pending.withLock { held in
            guard let bytes = held else { return nil }
            var done = 0
            while done < bytes.bytes.count {
                let n = bytes.bytes.withUnsafeBytes {
                    pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(bytes.offset) + off_t(done))
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            held = nil
            return nil
        }
        if let failed { throw StoreError("pwrite", base + ".part", errno: failed) }
    }

    /// Makes the part durable (its unwritten bytes first, then `fdatasync`) and returns its
    /// length: the prefix a resume may trust after a power cut (`ItemState.syncedBytes`).
    public func syncedLength() throws(StoreError) -> Int64 {
        try writeUnwritten()
        if fdatasync(fd) != 0 { throw StoreError("fdatasync", base + ".part") }
        var st = stat()
        if fstat(fd, &st) != 0 { throw StoreError("fstat", base + ".part") }
        return Int64(st.st_size)
    }

    /// Cuts the part back to `length` bytes (a resume that must start over, a bad tail).
    public func truncate(to length: Int64) throws(StoreError) {
        if ftruncate(fd, off_t(length)) != 0 { throw StoreError("ftruncate", base + ".part") }
    }
}

/// Writes the bytes the engine left unwritten (`StagingFile.unwritten`) on a thread of its own,
/// soon after each transfer ends: on many small files the engine's thread and the publisher's
/// are each busy enough that either would become the bottleneck with the writes on it. A write
/// that fails leaves the bytes in place; the publisher tries again, and reports the error.
public final class PartWriter: Sendable {
    private let queue = DispatchQueue(label: "spoolfetch-part-writer")

    public init() {}

    public func writeSoon(_ part: StagingFile) {
        queue.async { try? part.writeUnwritten() }
    }
}
