import Foundation

/// A request file this worker holds: moved into its folder `active/W/R` (see `WorkerFolder`).
/// It holds no text of the file: the engine indexes it from the file (`openFile`) and re-reads
/// one item's slice when the item starts. Holding it costs no descriptor — the worker's one
/// lock says it is alive — so a worker can hold any number of them.
public final class ClaimedRequest: Sendable {
    /// The request id: its name in the worker folder. Equals the producer's name unless a claim
    /// of that name was still open somewhere on the spool, in which case a `~N` suffix keeps both.
    public let name: String
    /// The request file's inode: tells this claim's group journal from one a same-named earlier
    /// request left behind, and the file from another that took its name.
    public let inode: UInt64
    /// The worker folder the request lives in now (it moves only to `done/`, `failed/` or
    /// `rejected/` when it ends).
    public let folder: Directory
    /// The request's owner: the uid of the file's inode as the claim's `fstat` saw it (for an
    /// adopted claim, its `stat` in the worker folder — the same inode, whose owner only root
    /// can change). `cancel`, `pause`, `resume` and `retry` are honoured for it (see
    /// ARCHITECTURE "Owners"), and an upload is read only if it could read the file.
    public let owner: uid_t

    /// Where to read the request file again.
    public var path: String { folder.path(of: name) }

    /// When the file last changed state: its claim (the rename into the worker's folder sets
    /// it; an adoption moves the folder, not the file), so a deadline counted from the claim
    /// survives a restart. nil when the file cannot be looked at.
    public func changeTime() -> Date? {
        guard let st = folder.status(of: name) else { return nil }
        return Date(timeIntervalSince1970: Double(st.st_ctim.tv_sec) + Double(st.st_ctim.tv_nsec) / 1e9)
    }

    /// The claim of `name` with this inode in `folder` (a worker folder): a holder that keeps
    /// the three facts in its own record, not this object, makes it again when it needs it.
    public init(name: String, inode: UInt64, folder: Directory, owner: uid_t) {
        self.name = name
        self.inode = inode
        self.folder = folder
        self.owner = owner
    }

    /// The whole file, read again (tests and tools; the daemon indexes it in chunks instead).
    public func readAll() throws(StoreError) -> [UInt8] {
        let fd = try openFile()
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw StoreError("fstat", path) }
        return try SpoolStore.readRequest(fd, size: st.st_size, limit: Int.max, path: path)
    }

    /// Up to `count` bytes of the request file from `offset` (fewer at its end): to parse an
    /// item again when it starts. Fails with ENOENT when the name no longer holds this file.
    public func read(at offset: Int64, count: Int) throws(StoreError) -> [UInt8] {
        let fd = try openFile()
        defer { close(fd) }
        var result = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = result.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError("pread", path)
            }
            if n == 0 { break }
            done += n
        }
        result.removeLast(count - done)
        return result
    }

    /// Opens the request file for reading (the caller closes the descriptor), checking that it
    /// is still this claim's file.
    public func openFile() throws(StoreError) -> Int32 {
        let fd = openat(folder.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError("open", path) }
        var st = stat()
        guard fstat(fd, &st) == 0, UInt64(st.st_ino) == inode else {
            close(fd)
            throw StoreError("open", path, errno: ENOENT)
        }
        return fd
    }
}
