import Foundation

/// A content-store hit reads and hashes the bytes it publishes: an entry's name is only what its
/// bytes hashed to when it went in, and bit rot or a stray write since then would otherwise be
/// published under a digest the bytes no longer have. So the sha256 a hit's marker carries is
/// computed from the published bytes themselves — the part a reflink or copy filled (read back
/// once after the copy, whatever the copy's method), or the entry itself under
/// `store-link = hardlink` — never taken from the entry's name.
///
/// Why hashing and not fs-verity: fs-verity would let the kernel vouch for an entry's bytes, but
/// it needs a filesystem built with the feature (ext4 `verity`, f2fs, btrfs), is missing on the
/// XFS, tmpfs, NFS, GlusterFS and FUSE folders stores live on, vouches for its own Merkle digest
/// rather than the file's SHA-256, and says nothing about the reflinked or copied part that is
/// actually published. One read of the bytes, on the store's copy thread, costs what
/// `Benchmarks/RESULTS.md` ("issue 59") measures per GiB, and holds on every filesystem.
extension ContentStore {
    /// An entry opened for a hit: its descriptor (closed with the value), inode and size.
    public final class OpenEntry: @unchecked Sendable {
        public let digest: String
        public let fd: Int32
        public let inode: UInt64
        public let size: Int64
        public let path: String

        init(digest: String, fd: Int32, inode: UInt64, size: Int64, path: String) {
            self.digest = digest
            self.fd = fd
            self.inode = inode
            self.size = size
            self.path = path
        }

        deinit { close(fd) }
    }

    /// The bytes a hit is about to publish, as read: their count and the SHA-256 computed from them.
    public struct HitBody: Sendable, Hashable {
        public let bytes: Int64
        /// Computed from the bytes that are published, never the entry's name.
        public let sha256: String
        /// How the part was filled; nil when the entry itself is published (hardlink).
        public let method: CopyMethod?

        public init(bytes: Int64, sha256: String, method: CopyMethod?) {
            self.bytes = bytes
            self.sha256 = sha256
            self.method = method
        }
    }

    /// Opens the entry `digest` for a hit; nil when the store does not hold it.
    public func openEntry(_ digest: String) throws(StoreError) -> OpenEntry? {
        guard let fd = try open(digest) else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0 else { let e = StoreError("fstat", entryPath(digest)); close(fd); throw e }
        touch(digest)
        return OpenEntry(digest: digest, fd: fd, inode: UInt64(st.st_ino), size: Int64(st.st_size), path: entryPath(digest))
    }

    /// Fills `out` (a fresh part) from the entry — a reflink where the filesystem can, else
    /// `copy_file_range`, else reads and writes — then reads `out` once from byte 0 and hashes it:
    /// the digest is that of what will be published. Slow for a large body: never on the engine's thread.
    public func fill(_ entry: OpenEntry, into out: Int32, outPath: String) throws(StoreError) -> HitBody {
        let method = try FileClone.copy(from: entry.fd, sourcePath: entry.path, to: out, outPath: outPath, bytes: entry.size)
        let (digest, bytes) = try FileClone.sha256(of: out, path: outPath)
        return HitBody(bytes: bytes, sha256: digest, method: method)
    }

    /// The entry itself is what is published (`store-link = hardlink`, `openAsPart`): read once and hashed.
    public func hashEntry(_ fd: Int32, digest: String) throws(StoreError) -> HitBody {
        let (found, bytes) = try FileClone.sha256(of: fd, path: entryPath(digest))
        return HitBody(bytes: bytes, sha256: found, method: nil)
    }

    /// Removes the entry `digest` a hit found rotten, only while its name still holds the inode
    /// that was read: a good entry another item or worker put in meanwhile stays. true when the
    /// rotten inode is no longer under the name (removed now, or gone or replaced already); false
    /// when it could not be removed (the store read-only to this process, say).
    @discardableResult
    public func removeRotten(_ digest: String, inode: UInt64) -> Bool {
        guard Self.isDigest(digest) else { return false }
        var st = stat()
        guard fstatat(objects.fd, inShard(digest), &st, AT_SYMLINK_NOFOLLOW) == 0, UInt64(st.st_ino) == inode else { return true }
        return unlinkat(objects.fd, inShard(digest), 0) == 0 || errno == ENOENT
    }
}
