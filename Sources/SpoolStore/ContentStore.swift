import Foundation

/// The content store: bodies kept by their SHA-256, shared by every worker on the spool, so that
/// bytes already fetched once are published again without a request (`--store`).
///
/// Layout under the store's folder:
///
///     sha256/ab/ab12…(64 hex)   an entry: read-only (0444), its bytes hashed to its name when it
///                               went in (a hit hashes them again: `StoreHit.swift`)
///     tmp/                      entries being written (`<digest>.<pid>.<n>.tmp`)
///     claims/<digest>           who fetches a digest now (`StoreClaims`)
///     counters/<worker>         a worker's hits and bytes saved (`spoolfetch store` adds them up;
///                               a worker that starts takes over those of its machine's gone ones)
///
/// An entry is made the way a file is published: written under a temp name, fsynced, read back
/// and hashed, then renamed (never replacing) into `sha256/ab/` and that folder fsynced. So a
/// `kill -9` or a power cut at any point leaves either no entry or one whose bytes hash to its
/// name — at worst a temp file, removed at the next start. Its access time says when it was last
/// used (set explicitly: `relatime`/`noatime` mounts do not keep it), for `--store-max`'s LRU.
public final class ContentStore: @unchecked Sendable {
    public let path: String
    let root: Directory
    let objects: Directory
    let temps: Directory
    public let claimsFolder: Directory
    let countersFolder: Directory
    private let counter = Counter()
    /// The folders' mode (the spool root's, as every spool folder).
    private let mode: mode_t

    /// Opens the store at `path`, creating it and its folders (mode `mode`) when missing.
    public init(path: String, mode: mode_t = 0o755) throws(StoreError) {
        try SpoolLayout.makeFolder(path, mode: mode)
        for name in ["sha256", "tmp", "claims", "counters"] { try SpoolLayout.makeFolder(path + "/" + name, mode: mode) }
        self.path = path
        self.mode = mode
        root = try Directory(opening: path)
        objects = try Directory(in: root, name: "sha256")
        temps = try Directory(in: root, name: "tmp")
        claimsFolder = try Directory(in: root, name: "claims")
        countersFolder = try Directory(in: root, name: "counters")
    }

    // MARK: Counters

    public struct Counters: Codable, Sendable, Hashable {
        /// Items published from the store.
        public var hits: Int
        /// Bytes they did not fetch.
        public var bytesSaved: Int64
        public init(hits: Int = 0, bytesSaved: Int64 = 0) { self.hits = hits; self.bytesSaved = bytesSaved }
    }

    /// Writes this worker's counters (`counters/WORKER`, atomically; not synced: a count lost in a
    /// power cut is only a statistic).
    public func save(_ counters: Counters, worker: String) throws(StoreError) {
        try countersFolder.writeAtomically(worker, SpoolJSON.encode(counters))
    }

    /// Takes over the counters of this machine's workers that are gone (`HOST-PID` with no such
    /// process), so that `counters/` holds one file per worker running or gone elsewhere, not
    /// one per run ever made: each such file is renamed to a hidden name first (of two workers
    /// starting at once only one gets it), its counts added to what is returned and written as
    /// `worker`'s, then removed. A crash in between loses those counts (hidden names are not
    /// added up) rather than counting them twice: they are only a statistic.
    public func takeOverCounters(of host: String, into worker: String) -> Counters {
        var total = Counters()
        var taken: [(name: String, hidden: String)] = []
        for name in countersFolder.list() where name.hasPrefix(host + "-") && name != worker {
            guard let pid = Int32(name.dropFirst(host.count + 1)), pid > 0, kill(pid, 0) != 0, errno == ESRCH else { continue }
            let hidden = ".\(name).taken-by-\(worker)"
            guard (try? countersFolder.rename(name, to: hidden, in: countersFolder, replace: false)) != nil else { continue }
            if let bytes = try? countersFolder.read(hidden, limit: 4096), let one = SpoolJSON.decode(Counters.self, bytes) {
                total.hits += one.hits
                total.bytesSaved += one.bytesSaved
            }
            taken.append((name, hidden))
        }
        guard !taken.isEmpty else { return total }
        do {
            try save(total, worker: worker)
            for file in taken { countersFolder.remove(file.hidden) }
        } catch {
            for file in taken { try? countersFolder.rename(file.hidden, to: file.name, in: countersFolder, replace: false) }
            return Counters()
        }
        return total
    }

    /// Every worker's counters added up.
    public func counters() -> Counters {
        var total = Counters()
        for name in countersFolder.list() where !name.hasPrefix(".") {
            guard let bytes = try? countersFolder.read(name, limit: 4096),
                  let one = SpoolJSON.decode(Counters.self, bytes) else { continue }
            total.hits += one.hits
            total.bytesSaved += one.bytesSaved
        }
        return total
    }

    /// The device of the store's filesystem (a hardlink into the final folder needs the same one).
    public var deviceID: UInt64? { root.deviceID() }

    /// 64 lowercase hex digits: the only names an entry may have (no path can be built from anything else).
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// `sha256/ab/ab…`, relative to the store.
    public static func entryName(_ digest: String) -> String { "sha256/" + shard(digest) + "/" + digest }
    static func shard(_ digest: String) -> String { String(digest.prefix(2)) }
    func inShard(_ digest: String) -> String { Self.shard(digest) + "/" + digest }

    public func entryPath(_ digest: String) -> String { path + "/" + Self.entryName(digest) }

    /// The entry's size, or nil when the store does not hold `digest`.
    public func size(of digest: String) -> Int64? {
        guard Self.isDigest(digest) else { return nil }
        var st = stat()
        guard fstatat(objects.fd, inShard(digest), &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    public func contains(_ digest: String) -> Bool { size(of: digest) != nil }

    // MARK: In

    public enum IngestOutcome: Sendable, Hashable {
        case added(CopyMethod)
        /// The store held it already (another item or worker put it in first).
        case present
    }

    /// Puts the first `bytes` bytes of `source` in as `digest`, unless the store holds it. The copy
    /// is verified against `digest` before it takes its name: a source that changed under it
    /// (a consumer editing the published file) never becomes an entry.
    public func ingest(from source: Int32, sourcePath: String, bytes: Int64, sha256 digest: String) throws(StoreError) -> IngestOutcome {
        guard Self.isDigest(digest) else { throw StoreError("ingest", sourcePath, errno: EINVAL, detail: "'\(digest)' is not a lowercase SHA-256") }
        if contains(digest) { touch(digest); return .present }
        let temp = "\(digest).\(getpid()).\(counter.next()).tmp"
        let out = try temps.createFresh(temp, access: O_RDWR)
        let outPath = temps.path(of: temp)
        defer { close(out) }
        do throws(StoreError) {
            let method = try FileClone.copy(from: source, sourcePath: sourcePath, to: out, outPath: outPath, bytes: bytes)
            if fsync(out) != 0 { throw StoreError("fsync", outPath) }
            let (found, size) = try FileClone.sha256(of: out, path: outPath)
            guard found == digest, size == bytes else {
                throw StoreError("verify", outPath, errno: EIO,
                                 detail: "the copy has \(size) bytes with sha256 \(found), expected \(bytes) with \(digest)")
            }
            if fchmod(out, 0o444) != 0 { throw StoreError("fchmod", outPath) }
            let shard = try openShard(digest)
            do {
                try temps.rename(temp, to: digest, in: shard, replace: false)
            } catch where error.errno == EEXIST {
                temps.remove(temp)
                return .present
            }
            try shard.sync()
            touch(digest)
            return .added(method)
        } catch {
            temps.remove(temp)
            throw error
        }
    }

    /// `sha256/ab/`, made (and `sha256/` synced, so the new folder survives a power cut) when missing.
    private func openShard(_ digest: String) throws(StoreError) -> Directory {
        let name = Self.shard(digest)
        if mkdirat(objects.fd, name, mode) == 0 {
            _ = fchmodat(objects.fd, name, mode, 0)     // mkdir applies the umask
            try objects.sync()
        } else if errno != EEXIST {
            throw StoreError("mkdir", objects.path(of: name))
        }
        return try Directory(in: objects, name: name)
    }

    // MARK: Out

    /// Opens the entry read-only; nil when the store does not hold `digest`.
    public func open(_ digest: String) throws(StoreError) -> Int32? {
        guard Self.isDigest(digest) else { return nil }
        let fd = openat(objects.fd, inShard(digest), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw StoreError("open", entryPath(digest))
        }
        return fd
    }

    /// Copies the entry `digest` into `out` (a fresh staging part): a reflink where the
    /// filesystem can. nil when the store does not hold it (evicted meanwhile).
    public func copy(_ digest: String, into out: Int32, outPath: String, reflink: Bool = true) throws(StoreError) -> (bytes: Int64, method: CopyMethod)? {
        guard let fd = try open(digest) else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw StoreError("fstat", entryPath(digest)) }
        let method = try FileClone.copy(from: fd, sourcePath: entryPath(digest), to: out, outPath: outPath,
                                        bytes: Int64(st.st_size), reflink: reflink)
        touch(digest)
        return (Int64(st.st_size), method)
    }

    /// The entry itself as an unnamed part (`store-link = hardlink`): publishing links it into the
    /// final folder, so the published file is the entry — one inode, read-only. nil when absent.
    public func openAsPart(_ digest: String, base: String) throws(StoreError) -> StagingFile? {
        guard let fd = try open(digest) else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0 else { let e = StoreError("fstat", entryPath(digest)); close(fd); throw e }
        touch(digest)
        return StagingFile(base: base, fd: fd, inode: UInt64(st.st_ino), size: Int64(st.st_size), isNamed: false)
    }

    /// Marks the entry used now (its access time), for the LRU order of `evict`.
    public func touch(_ digest: String) {
        var times = [timespec(tv_sec: 0, tv_nsec: utimeNow), timespec(tv_sec: 0, tv_nsec: utimeOmit)]
        _ = utimensat(objects.fd, inShard(digest), &times, AT_SYMLINK_NOFOLLOW)
    }

    // MARK: The whole store

    public struct Entry: Sendable, Hashable {
        public let digest: String
        public let bytes: Int64
        /// Last use (access time), seconds since 1970.
        public let lastUsed: Double
    }

    /// Every entry (names that are not digests are left out).
    public func entries() -> [Entry] {
        var out: [Entry] = []
        for shard in objects.list() where shard.utf8.count == 2 {
            guard let folder = try? Directory(in: objects, name: shard) else { continue }
            for name in folder.list() where Self.isDigest(name) && name.hasPrefix(shard) {
                var st = stat()
                guard fstatat(folder.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
                out.append(Entry(digest: name, bytes: Int64(st.st_size),
                                 lastUsed: Double(st.st_atim.tv_sec) + Double(st.st_atim.tv_nsec) / 1e9))
            }
        }
        return out
    }

    /// How many entries and bytes the store holds (a listing: off the engine's thread).
    public func totals() -> (entries: Int, bytes: Int64) {
        let all = entries()
        return (all.count, all.reduce(0) { $0 + $1.bytes })
    }

    /// Removes an entry (eviction, a failed verification). Not synced: a removal lost in a power
    /// cut leaves an entry that is still correct.
    public func remove(_ digest: String) {
        guard Self.isDigest(digest) else { return }
        _ = unlinkat(objects.fd, inShard(digest), 0)
    }

    /// Removes least recently used entries, never one in `inUse`, until the store holds at most
    /// `maxBytes`; returns the removed ones.
    @discardableResult
    public func evict(toFit maxBytes: Int64, inUse: Set<String>) -> [Entry] {
        let all = entries()
        var total = all.reduce(Int64(0)) { $0 + $1.bytes }
        guard total > maxBytes else { return [] }
        var removed: [Entry] = []
        for entry in StoreEviction.order(all) where total > maxBytes && !inUse.contains(entry.digest) {
            remove(entry.digest)
            total -= entry.bytes
            removed.append(entry)
        }
        return removed
    }

    public struct Mismatch: Sendable, Hashable {
        public let digest: String
        public let found: String
        public let bytes: Int64
    }

    /// Hashes every entry again; removes (and returns) those whose bytes do not hash to their name.
    public func verify() -> (checked: Int, mismatches: [Mismatch], errors: [StoreError]) {
        var mismatches: [Mismatch] = [], errors: [StoreError] = []
        let all = entries()
        for entry in all {
            do throws(StoreError) {
                guard let fd = try open(entry.digest) else { continue }
                defer { close(fd) }
                let (found, bytes) = try FileClone.sha256(of: fd, path: entryPath(entry.digest))
                if found != entry.digest {
                    remove(entry.digest)
                    mismatches.append(Mismatch(digest: entry.digest, found: found, bytes: bytes))
                }
            } catch {
                errors.append(error)
            }
        }
        return (all.count, mismatches, errors)
    }

    /// Temp files of ingests that never finished (a crash): all of them when `all`, else those
    /// untouched for an hour (a live worker on another machine may be writing one).
    public func removeLeftovers(all: Bool, now: Date = Date()) {
        for name in temps.list() where name.hasSuffix(".tmp") {
            var st = stat()
            guard fstatat(temps.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if all || now.timeIntervalSince1970 - Double(st.st_mtim.tv_sec) > 3600 { temps.remove(name) }
        }
    }

    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func next() -> Int { lock.lock(); defer { lock.unlock() }; value += 1; return value }
    }
}

/// The order `--store-max` removes entries in: least recently used first, the larger first among
/// equals (fewer removals), then by name (the same order on every worker).
public enum StoreEviction {
    public static func order(_ entries: [ContentStore.Entry]) -> [ContentStore.Entry] {
        entries.sorted {
            if $0.lastUsed != $1.lastUsed { return $0.lastUsed < $1.lastUsed }
            if $0.bytes != $1.bytes { return $0.bytes > $1.bytes }
            return $0.digest < $1.digest
        }
    }
}
