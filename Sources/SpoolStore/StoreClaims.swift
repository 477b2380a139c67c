import Foundation

/// Who fetches a digest for the content store now, spool-wide: `store/claims/<digest>`, made with
/// `O_CREAT | O_EXCL` by the worker that fetches it, removed when its fetch ended (the entry in the
/// store, or the fetch given up).
///
/// No lock decides: on GPFS, NFS without a lock manager, CIFS or GlusterFS a `flock` may be
/// granted to every machine at once (see `FileLock`), but an exclusive create is answered by the
/// server, once. A claim is a lease: its holder touches it (`refresh`) while it fetches; a waiter
/// that sees its text and modification time unchanged for the lease's timeout by its own
/// monotonic clock — never comparing two machines' clocks — or whose writer is certainly gone
/// (same boot, same pid namespace, no such process), breaks it: one `rename` to a name of its
/// own, which only one breaker wins, then creates its own claim.
public final class StoreClaims: @unchecked Sendable {
    let folder: Directory
    /// This worker's name (`status` shows it with the item).
    let worker: String
    private var broken = 0

    public init(folder: Directory, worker: String) {
        self.folder = folder
        self.worker = worker
    }

    /// What a claim file says: its holder and when it was last touched (its mtime, on the
    /// server's clock: compared only with itself).
    public struct Holder: Sendable, Hashable {
        public let text: String
        public let touched: Double
        /// `REQUEST#INDEX` of the item that fetches it.
        public var item: String { field("item") ?? "?" }
        public var worker: String { field("worker") ?? "?" }
        /// The holder's process is certainly gone (this machine's boot and pid namespace, no such pid).
        public var isGone: Bool { ProcessIdentity.isGone(leaseText: text) }
        /// Its text names no process: being written this instant, or cut short by a crash or a
        /// power cut (a claim is not synced: a lost one only costs a second fetch).
        public var isUnreadable: Bool { ProcessIdentity(leaseText: text) == nil }
        /// This process holds it.
        public var isMine: Bool { ProcessIdentity(leaseText: text) == ProcessIdentity.mine }

        private func field(_ key: String) -> String? {
            for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) where word.hasPrefix(key + "=") {
                return String(word.dropFirst(key.count + 1))
            }
            return nil
        }
    }

    public enum Answer: Sendable, Hashable {
        case claimed
        case heldBy(Holder)
    }

    /// Claims `digest` for `item`, unless someone holds it.
    public func claim(_ digest: String, item: String) throws(StoreError) -> Answer {
        guard ContentStore.isDigest(digest) else { throw StoreError("claim", folder.path, errno: EINVAL, detail: "'\(digest)' is not a SHA-256") }
        let text = "worker=\(worker) item=\(item) \(ProcessIdentity.mine.text)\n"
        let fd = openat(folder.fd, digest, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if fd < 0 {
            guard errno == EEXIST else { throw StoreError("open(O_EXCL)", folder.path(of: digest)) }
            if let holder = holder(digest) { return .heldBy(holder) }
            // Removed between the create and the read: free again.
            return try claim(digest, item: item)
        }
        defer { close(fd) }
        do throws(StoreError) { try FileIO.writeAll(fd, Array(text.utf8), path: folder.path(of: digest)) } catch {
            folder.remove(digest)
            throw error
        }
        return .claimed
    }

    /// The claim's holder; nil when no one holds `digest`.
    public func holder(_ digest: String) -> Holder? {
        let fd = openat(folder.fd, digest, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, let bytes = try? FileIO.readUpTo(fd, limit: 4096, path: folder.path(of: digest)) else { return nil }
        return Holder(text: String(decoding: bytes, as: UTF8.self),
                      touched: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
    }

    /// Touches this process's claim on `digest` (the lease's renewal).
    public func refresh(_ digest: String) {
        guard ContentStore.isDigest(digest) else { return }
        var times = [timespec(tv_sec: 0, tv_nsec: utimeNow), timespec(tv_sec: 0, tv_nsec: utimeNow)]
        _ = utimensat(folder.fd, digest, &times, AT_SYMLINK_NOFOLLOW)
    }

    /// Removes this process's claim on `digest` (a claim another took over is left alone).
    public func release(_ digest: String) {
        guard let holder = holder(digest), holder.isMine else { return }
        folder.remove(digest)
    }

    /// Breaks the claim `seen` (stale, or its holder gone): renamed away, then removed. false when
    /// the claim changed since (renewed, or broken by another waiter first).
    public func breakClaim(_ digest: String, seen: Holder) -> Bool {
        guard ContentStore.isDigest(digest) else { return false }
        broken += 1
        let aside = "\(digest).broken.\(getpid()).\(broken)"
        guard renameat(folder.fd, digest, folder.fd, aside) == 0 else { return false }
        // What was renamed must be what was judged: a claim renewed or made anew in between goes back.
        if let moved = holder(aside), moved.text == seen.text, moved.touched == seen.touched {
            folder.remove(aside)
            return true
        }
        if linkat(folder.fd, aside, folder.fd, digest, 0) != 0 { /* a new claim took the name: it wins */ }
        folder.remove(aside)
        return false
    }

    /// Claims of processes gone and broken-aside leftovers, removed at start by a worker alone on the spool.
    public func removeLeftovers() {
        for name in folder.list() {
            if name.contains(".broken.") { folder.remove(name); continue }
            if let holder = holder(name), holder.isGone { folder.remove(name) }
        }
    }
}
