import Foundation
import Synchronization

/// A request file this daemon holds: renamed into `active/` and locked with `flock`, so that no
/// other worker adopts it while this one lives. Closing the descriptor (deinit) releases the lock.
public final class ClaimedRequest: @unchecked Sendable {
    /// The name in `active/` (the request id). Equals the producer's name unless that name was
    /// still active from an earlier request, in which case a `~N` suffix keeps both.
    public let name: String
    /// The file's bytes, read once (at most the size limit + 1, so an oversize file is detected
    /// without reading it all).
    public let bytes: [UInt8]
    /// The request file's inode: tells this claim's group journal from one a same-named earlier
    /// request left behind.
    public let inode: UInt64
    private let fd: Int32

    init(name: String, bytes: [UInt8], fd: Int32, inode: UInt64) {
        self.name = name
        self.bytes = bytes
        self.fd = fd
        self.inode = inode
    }

    deinit { close(fd) }
}

/// What became of an attempt to claim `incoming/R`.
public enum ClaimResult: Sendable {
    case claimed(ClaimedRequest)
    /// Not there (any more): another worker claimed it, or it was a duplicate event.
    case gone
    /// Not a regular file (a symlink, a fifo, a folder): it is never opened for reading.
    case refused(code: String, message: String)
}

/// The spool on disk: claims, staging files, rejection and group completion. Every transition
/// has one commit point, a `rename` (see the state table in README.md).
public struct SpoolStore: Sendable {
    public let layout: SpoolLayout
    /// Request files larger than this are read only this far (+1 byte) and rejected by the parser.
    public let maxRequestBytes: Int

    public init(layout: SpoolLayout, maxRequestBytes: Int = 65_536) {
        self.layout = layout
        self.maxRequestBytes = maxRequestBytes
    }

    // MARK: Claiming

    /// Claims `incoming/name`: open (never following a symlink), lock, rename into `active/`.
    ///
    /// The lock is taken before the rename, on the inode, so there is no moment at which the
    /// file sits in `active/` unlocked and another worker could adopt it.
    public func claim(_ name: String) throws(StoreError) -> ClaimResult {
        let incoming = layout.incoming
        let fd = openat(incoming.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            switch errno {
            case ENOENT: return .gone
            case ELOOP: return .refused(code: "symlink", message: "the request file is a symbolic link; it was not read")
            case ENXIO: return .refused(code: "not-regular-file", message: "the request file is not a regular file")
            default: throw StoreError("open", incoming.path(of: name))
            }
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { let e = StoreError("fstat", incoming.path(of: name)); close(fd); throw e }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            return .refused(code: "not-regular-file", message: "the request file is not a regular file")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { close(fd); return .gone }
        var activeName = name
        var suffix = 0
        while true {
            do throws(StoreError) {
                try incoming.rename(name, to: activeName, in: layout.active, replace: false)
                break
            } catch {
                if error.errno == ENOENT { close(fd); return .gone }
                if error.errno == EEXIST && suffix < 1000 {
                    suffix += 1
                    activeName = Self.suffixed(name, suffix, separator: "~")
                    continue
                }
                close(fd)
                throw error
            }
        }
        do throws(StoreError) {
            let bytes = try FileIO.readUpTo(fd, limit: maxRequestBytes + 1, path: layout.active.path(of: activeName))
            return .claimed(ClaimedRequest(name: activeName, bytes: bytes, fd: fd, inode: UInt64(st.st_ino)))
        } catch {
            close(fd)
            throw error
        }
    }

    /// Requests in `active/` whose worker is gone (no lock held): adopted by this worker.
    /// Requests this process already holds are skipped too (a second `flock` on a new open file
    /// description conflicts even within one process).
    public func adoptOrphans() -> [ClaimedRequest] {
        var adopted: [ClaimedRequest] = []
        for name in layout.active.list() where !name.hasPrefix(".") {
            let fd = openat(layout.active.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0,
                  let bytes = try? FileIO.readUpTo(fd, limit: maxRequestBytes + 1, path: layout.active.path(of: name))
            else { close(fd); continue }
            // It may have been finished and moved away between the listing and the lock.
            var byName = stat(), byFD = stat()
            guard fstatat(layout.active.fd, name, &byName, AT_SYMLINK_NOFOLLOW) == 0, fstat(fd, &byFD) == 0,
                  byName.st_ino == byFD.st_ino else { close(fd); continue }
            adopted.append(ClaimedRequest(name: name, bytes: bytes, fd: fd, inode: UInt64(byFD.st_ino)))
        }
        return adopted
    }

    // MARK: Rejection

    /// Files a claimed request in `rejected/`: the error file first, then the request (commit).
    public func reject(_ claim: ClaimedRequest, _ record: ErrorRecord) throws(StoreError) {
        try file(claim.name, from: layout.active, into: layout.rejected, record: record)
    }

    /// Files an unclaimable entry of `incoming/` (a symlink, a fifo) in `rejected/` without opening it.
    public func rejectUnclaimed(_ name: String, _ record: ErrorRecord) throws(StoreError) {
        try file(name, from: layout.incoming, into: layout.rejected, record: record)
    }

    /// Moves `name` from `source` into `target` under its own name, or with a `-N` suffix if that
    /// name (or its `.error`) is taken, writing `N.error` first when a record is given.
    @discardableResult
    func file(_ name: String, from source: Directory, into target: Directory,
              record: ErrorRecord?) throws(StoreError) -> String {
        for attempt in 0..<1000 {
            let candidate = attempt == 0 ? name : Self.suffixed(name, attempt, separator: "-")
            if target.exists(candidate) || target.exists(candidate + ".error") { continue }
            if let record {
                var r = record
                r.request = candidate
                // Durable before the request moves beside it: the move is the commit point.
                try target.writeAtomically(candidate + ".error", SpoolJSON.encode(r), replace: false, sync: true)
            }
            do throws(StoreError) {
                try source.rename(name, to: candidate, in: target, replace: false)
            } catch {
                if record != nil { target.remove(candidate + ".error") }
                if error.errno == EEXIST { continue }
                throw error
            }
            // The target's sync makes the move durable: one rename is one journal transaction
            // for both folders (ext4, xfs, btrfs) or one synchronous call (NFS).
            try target.sync()
            return candidate
        }
        throw StoreError("rename", target.path(of: name), errno: EEXIST)
    }

    // MARK: Group completion

    /// Ends a request's group: writes `GROUP.group.done` (once — its name is journaled in
    /// `staging/B.INODE.group` first, so a restart finds it instead of writing a second one), then moves
    /// the request into `done/` or, when an item failed, into `failed/` beside its `.error`.
    ///
    /// The journal stays until `groupHookDone` removes it: it is also the record that the group
    /// hook has not run yet, so a crash before the hook ran runs it at the next start
    /// (`pendingGroupHooks`), and never twice once it has.
    ///
    /// The journal comes back locked: while its owner lives, no other worker takes its hook for
    /// one an earlier run left behind.
    public func endGroup(_ claim: ClaimedRequest, marker: GroupMarker,
                         failure: ErrorRecord?) throws(StoreError) -> (markerPath: String, journal: HeldLock) {
        let journalName = Self.stagingBase(claim.name) + ".\(claim.inode).group"
        let markerName: String
        let journal: HeldLock
        if let bytes = try? layout.staging.read(journalName), let previous = SpoolJSON.decode(GroupJournal.self, bytes),
           layout.final.exists(previous.marker), let held = layout.staging.lockExisting(journalName) {
            markerName = previous.marker
            journal = held
        } else {
            markerName = try chooseGroupMarkerName(marker.group)
            // Durable before the marker exists, or a crash could leave a marker nobody knows of.
            journal = try layout.staging.writeAtomicallyLocked(
                journalName, SpoolJSON.encode(GroupJournal(request: claim.name, marker: markerName)), sync: true)
            try layout.final.writeAtomically(markerName, SpoolJSON.encode(marker), replace: false, sync: true)
            try layout.final.sync()
        }
        // On a retry whose move went through (only its folder sync failed), nothing is left to move.
        guard layout.active.status(of: claim.name).map({ UInt64($0.st_ino) }) == claim.inode else {
            return (layout.final.path(of: markerName), journal)
        }
        if let failure {
            try file(claim.name, from: layout.active, into: layout.failed, record: failure)
        } else {
            try file(claim.name, from: layout.active, into: layout.done, record: nil)
        }
        return (layout.final.path(of: markerName), journal)
    }

    /// The group hook has run (or there is none): forget the group.
    public func groupHookDone(_ journal: HeldLock) {
        layout.staging.remove(journal.name)
    }

    /// Groups that ended in an earlier run whose hook had not run yet (their request has left
    /// `active/`): the journal, now locked by this worker, and the group marker. A journal
    /// another live worker holds is its own business (its hook is running) and is left alone.
    public func pendingGroupHooks() -> [(journal: HeldLock, markerPath: String, marker: GroupMarker?)] {
        var pending: [(journal: HeldLock, markerPath: String, marker: GroupMarker?)] = []
        for name in layout.staging.list() where name.hasSuffix(".group") && !name.hasPrefix(".") {
            guard let held = layout.staging.lockExisting(name), let bytes = try? layout.staging.read(name),
                  let journal = SpoolJSON.decode(GroupJournal.self, bytes),
                  !layout.active.exists(journal.request) else { continue }
            guard layout.final.exists(journal.marker) else { layout.staging.remove(name); continue }
            let marker = (try? layout.final.read(journal.marker)).flatMap { SpoolJSON.decode(GroupMarker.self, $0) }
            pending.append((held, layout.final.path(of: journal.marker), marker))
        }
        return pending
    }

    private func chooseGroupMarkerName(_ group: String) throws(StoreError) -> String {
        for attempt in 0..<10_000 {
            let name = (attempt == 0 ? group : "\(group)-\(attempt)") + ".group.done"
            if !layout.final.exists(name) { return name }
        }
        throw StoreError("create", layout.final.path(of: group + ".group.done"), errno: EEXIST)
    }

    // MARK: Staging

    /// The staging base name of a request (and, with an index, of one of its items): the request
    /// name itself when short, else a prefix plus a hash, so `B.part` always fits in 255 bytes.
    public static func stagingBase(_ request: String, index: Int? = nil) -> String {
        var base = request
        if base.utf8.count > 200 {
            var prefix = ""
            for ch in request {
                if prefix.utf8.count + String(ch).utf8.count > 180 { break }
                prefix.append(ch)
            }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325       // FNV-1a, just to tell long names apart
            for b in request.utf8 { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
            base = prefix + "~" + String(hash, radix: 16)
        }
        if let index { base += ".\(index)" }
        return base
    }

    public func readState(_ base: String) -> ItemState? {
        guard let bytes = try? layout.staging.read(base + ".state") else { return nil }
        return SpoolJSON.decode(ItemState.self, bytes)
    }

    /// Writes `staging/batch-PID-N.journal`, the states of one publish batch, and keeps it
    /// locked: its owner removes it once every request it mentions has ended its group (until
    /// then it is what tells an adopter that an item was already published).
    public func writeJournal(_ states: [ItemState]) throws(StoreError) -> HeldLock {
        let name = "batch-\(getpid())-\(JournalCounter.next()).journal"
        return try layout.staging.writeAtomicallyLocked(name, SpoolJSON.encode(states: states))
    }

    /// Item states recorded by publish batches of dead workers (a crash, a kill, a stop with
    /// requests still claimed), by staging base. Journals a live worker holds are skipped.
    public func readJournals() -> (states: [String: ItemState], files: [String]) {
        var states: [String: ItemState] = [:]
        var files: [String] = []
        for name in layout.staging.list() where name.hasSuffix(".journal") && !name.hasPrefix(".") {
            if layout.staging.isLockedByAnother(name) { continue }
            files.append(name)
            guard let bytes = try? layout.staging.read(name, limit: 64 << 20),
                  let list = SpoolJSON.decode([ItemState].self, bytes) else { continue }
            for state in list { states[Self.stagingBase(state.request, index: state.index)] = state }
        }
        return (states, files)
    }

    public func writeState(_ base: String, _ state: ItemState) throws(StoreError) {
        try layout.staging.writeAtomically(base + ".state", SpoolJSON.encode(state))
    }

    /// Opens `B.part` for writing. `fresh`: any old part is removed and a new one created with
    /// O_EXCL (the "item running" commit point); else an existing part is reopened to resume.
    public func openPart(_ base: String, fresh: Bool) throws(StoreError) -> StagingFile {
        let name = base + ".part"
        let fd: Int32
        if fresh {
            fd = try layout.staging.createFresh(name, access: O_RDWR)
        } else {
            fd = openat(layout.staging.fd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_CREAT, 0o644)
            guard fd >= 0 else { throw StoreError("open", layout.staging.path(of: name)) }
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { let e = StoreError("fstat", layout.staging.path(of: name)); close(fd); throw e }
        return StagingFile(base: base, fd: fd, inode: UInt64(st.st_ino), size: Int64(st.st_size))
    }

    /// Reopens an existing `B.part`; nil when there is none.
    public func openPartIfPresent(_ base: String) throws(StoreError) -> StagingFile? {
        partExists(base) ? try openPart(base, fresh: false) : nil
    }

    public func partExists(_ base: String) -> Bool { layout.staging.exists(base + ".part") }

    /// Removes an item's staging files (after its group ended).
    public func removeStaging(_ base: String) {
        layout.staging.remove(base + ".part")
        layout.staging.remove(base + ".state")
    }

    /// After a crash between the data rename and the marker rename: the published data file of
    /// an item, found by the part's inode among `name`, `name-1`, … in the final folder.
    public func findPublished(name: String, inode: UInt64) -> String? {
        for attempt in 0..<100 {
            let candidate = attempt == 0 ? name : Self.suffixed(name, attempt, separator: "-")
            guard let st = layout.final.status(of: candidate) else { if attempt > 0 { return nil }; continue }
            if UInt64(st.st_ino) == inode { return candidate }
        }
        return nil
    }

    /// Removes temp files a crash left behind (`.X.tmp` written by `writeAtomically`).
    ///
    /// `olderThan`: only temp files not modified for that many seconds — when other workers
    /// are alive (see `WorkerRegistration`), a fresh temp file may be one they are writing.
    public func sweepTemporaries(olderThan age: TimeInterval? = nil) -> Int {
        var removed = 0
        var folders = [layout.staging, layout.done, layout.failed, layout.rejected]
        if layout.final !== layout.done { folders.append(layout.final) }
        let cutoff = age.map { Date().timeIntervalSince1970 - $0 }
        for folder in folders {
            for name in folder.list() where name.hasPrefix(".") && name.hasSuffix(".tmp") {
                if let cutoff {
                    guard let st = folder.status(of: name), Double(st.st_mtim.tv_sec) < cutoff else { continue }
                }
                folder.remove(name)
                removed += 1
            }
        }
        return removed
    }

    /// `name-1.ext` style names: the suffix goes before the extension, so the type stays visible.
    public static func suffixed(_ name: String, _ n: Int, separator: String) -> String {
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            let stem = name[..<dot], ext = name[dot...]
            let candidate = "\(stem)\(separator)\(n)\(ext)"
            if candidate.utf8.count <= 255 { return candidate }
        }
        var stem = name
        while (stem + "\(separator)\(n)").utf8.count > 255 { stem.removeLast() }
        return "\(stem)\(separator)\(n)"
    }
}

/// `staging/B.INODE.group`: which group marker a request's group end wrote.
struct GroupJournal: Codable {
    var request: String
    var marker: String
}

/// Numbers journal files within one process.
enum JournalCounter {
    private static let counter = Mutex<Int>(0)
    static func next() -> Int { counter.withLock { $0 += 1; return $0 } }
}

/// An open `staging/B.part`. The owner of its descriptor for the item's whole attempt.
public final class StagingFile: @unchecked Sendable {
    public let base: String
    public let fd: Int32
    public let inode: UInt64
    /// Size when opened (the resumable prefix).
    public let size: Int64

    init(base: String, fd: Int32, inode: UInt64, size: Int64) {
        self.base = base
        self.fd = fd
        self.inode = inode
        self.size = size
    }

    deinit { close(fd) }

    /// Cuts the part back to `length` bytes (a resume that must start over, a bad tail).
    public func truncate(to length: Int64) throws(StoreError) {
        if ftruncate(fd, off_t(length)) != 0 { throw StoreError("ftruncate", base + ".part") }
    }
}
