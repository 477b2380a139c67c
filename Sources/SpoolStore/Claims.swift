import Foundation
import Synchronization

/// A request taken over from a dead worker (`SpoolStore.adoptOrphans`), not read yet: `folder`
/// is the dead worker's folder, now this worker's, or this worker's own.
public struct AdoptedClaim: Sendable {
    public let name: String
    public let folder: Directory
}

/// What became of an attempt to claim `incoming/R`.
public enum ClaimResult: Sendable {
    case claimed(ClaimedRequest)
    /// Not there (any more): another worker claimed it, or it was a duplicate event.
    case gone
    /// It was there when opened, but another worker's claim moved it away first (on a network
    /// filesystem, this worker may still have seen it through its cache).
    case lost
    /// Not a regular file (a symlink, a fifo, a folder): it is never opened for reading.
    case refused(code: String, message: String)
}

/// The store's worker folder, shared by copies of one `SpoolStore`: created at the first claim
/// or adoption unless one was handed in.
final class WorkerSlot: Sendable {
    private let folder = Mutex<WorkerFolder?>(nil)
    /// The lease settings for the folder, and who is told when its lease is lost.
    private let setup = Mutex<(lease: LeaseSettings, onLost: (@Sendable (String) -> Void)?)>((LeaseSettings(), nil))

    func set(_ worker: WorkerFolder) {
        folder.withLock { $0 = worker }
        if let onLost = setup.withLock({ $0.onLost }) { worker.lease.setOnLost(onLost) }
    }

    var leaseSettings: LeaseSettings {
        get { setup.withLock { $0.lease } }
        set { setup.withLock { $0.lease = newValue } }
    }

    func setOnLost(_ handler: @escaping @Sendable (String) -> Void) {
        setup.withLock { $0.onLost = handler }
        current?.lease.setOnLost(handler)
    }

    /// The folder, if there is one yet (never creates it).
    var current: WorkerFolder? { folder.withLock { $0 } }

    func get(layout: SpoolLayout) throws(StoreError) -> WorkerFolder {
        let result: Result<WorkerFolder, StoreError> = folder.withLock { slot in
            if let existing = slot { return .success(existing) }
            do throws(StoreError) {
                let (settings, onLost) = setup.withLock { ($0.lease, $0.onLost) }
                let created = try WorkerFolder(layout: layout, lease: settings)
                if let onLost { created.lease.setOnLost(onLost) }
                slot = created
                return .success(created)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    func release() { folder.withLock { $0 }?.release() }
}

extension SpoolStore {
    // MARK: Claiming

    /// This worker's folder in `active/` (created on first use).
    public func workerFolder() throws(StoreError) -> WorkerFolder {
        try workerSlot.get(layout: layout)
    }

    /// A clean exit: the worker folder goes if it is empty and its lock is released (see
    /// `WorkerFolder.release`). No claim or adoption may follow.
    public func releaseWorkerFolder() {
        workerSlot.release()
    }

    /// Whether a request that ended under `name` still holds it: filed in `done/`, `failed/` or
    /// `rejected/`, or a group marker `name.group.done` in the final folder (its default group).
    func endedNameIsUsed(_ name: String) -> Bool {
        layout.done.exists(name) || layout.failed.exists(name) || layout.rejected.exists(name)
            || layout.final.exists(name + ".group.done")
    }

    /// Claims `incoming/name`: opened first (never following a symlink) to refuse what is not a
    /// regular file, then renamed into this worker's folder — the commit point — under a name
    /// no other claim on the spool has, read, and closed.
    public func claim(_ name: String) throws(StoreError) -> ClaimResult {
        let incoming = layout.incoming
        // Looked at before it is opened: a FIFO opened for reading would wake a writer blocked on
        // it (and a device could act on the open), so what is not a regular file is never opened.
        var byName = stat()
        guard fstatat(incoming.fd, name, &byName, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return .gone }
            throw StoreError("fstatat", incoming.path(of: name))
        }
        if let refusal = Self.refusal(ofType: byName.st_mode) { return refusal }
        let fd = openat(incoming.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            switch errno {
            case ENOENT: return .gone
            case ELOOP: return Self.refusal(ofType: S_IFLNK)!
            case ENXIO: return .refused(code: "not-regular-file", message: "the request file is not a regular file")
            default: throw StoreError("open", incoming.path(of: name))
            }
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw StoreError("fstat", incoming.path(of: name)) }
        if let refusal = Self.refusal(ofType: st.st_mode) { return refusal }
        // The owner is the file's: a second link could be another user's file linked in, whose
        // owner the linker would then act as (see `linkedByOwner`).
        if st.st_nlink != 1, !Self.linkedByOwner(st) { return Self.hardLinked(st.st_nlink) }
        let worker = try workerFolder()
        guard !worker.isReleased else { throw StoreError("claim", incoming.path(of: name), errno: ESHUTDOWN) }
        let moved = try worker.names.withLock { folders throws(StoreError) in
            try worker.names.moveIn(name, from: incoming, at: nil, into: worker, folders: folders, used: endedNameIsUsed)
        }
        guard let claimed = moved else { return .lost }
        if let now = worker.directory.status(of: claimed), now.st_ino == st.st_ino {
            return .claimed(ClaimedRequest(name: claimed, inode: UInt64(st.st_ino), folder: worker.directory, owner: st.st_uid))
        }
        // The name was taken by another file between the open and the rename (a producer
        // replaced it): what was moved in is that file, read afresh.
        if let claim = readClaim(claimed, in: worker.directory) { return .claimed(claim) }
        let record = ErrorRecord(request: claimed, code: "not-regular-file", message: "the request file is not a regular file")
        try file(claimed, from: worker.directory, into: layout.rejected, record: record)
        return .gone
    }

    /// A request file with more than one link that its owner need not have made: refused unread
    /// (`hard-linked-request`).
    static func hardLinked(_ links: nlink_t) -> ClaimResult {
        .refused(code: "hard-linked-request",
                 message: "the request file has \(links) hard links and its group or others may write it, so someone but its owner may have linked it in; a request's owner is its file's owner: write it into incoming/, or link in only a file nobody else may write")
    }

    /// Whether a file with several links can only have been linked in by its owner (or root):
    /// with `fs.protected_hardlinks = 1` (Debian's default) a user may link only a file it owns or
    /// may read and write, so a file neither its group nor others may write was linked by its
    /// owner — Maildir's delivery, `ln tmp/x incoming/x`, stays. Without that protection, or with a
    /// group- or world-writable file, anyone could have linked it, and the link is refused.
    static func linkedByOwner(_ st: stat) -> Bool {
        protectedHardlinks && st.st_mode & 0o022 == 0
    }

    /// `fs.protected_hardlinks`, read once.
    static let protectedHardlinks: Bool = {
        guard let text = try? String(contentsOfFile: "/proc/sys/fs/protected_hardlinks", encoding: .utf8) else { return false }
        return text.trimmingCharacters(in: .whitespacesAndNewlines) == "1"
    }()

    /// Why an entry of this type (`st_mode`) in `incoming/` is not a request; nil for a regular
    /// file. The message names what it is, so the producer who made it can tell what went wrong.
    static func refusal(ofType mode: mode_t) -> ClaimResult? {
        let what: String
        switch mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFLNK: return .refused(code: "symlink", message: "the request file is a symbolic link; it was not read")
        case S_IFDIR: what = "a directory"
        case S_IFIFO: what = "a FIFO (named pipe)"
        case S_IFCHR: what = "a character device"
        case S_IFBLK: what = "a block device"
        case S_IFSOCK: what = "a socket"
        default: what = "of an unknown file type"
        }
        return .refused(code: "not-regular-file",
                        message: "the request file is not a regular file but \(what); it was not read (a request is a regular file)")
    }

    /// Requests whose worker is gone, now this worker's: every request in a worker folder whose
    /// owner is dead (see `SpoolLiveness`) — the folder is taken over whole by one rename,
    /// `active/F` → `active/W~ORIGIN`, and its requests stay in it — and request files lying
    /// directly in `active/` (the layout without worker folders) that no one has `flock`ed,
    /// moved into this worker's folder under the spool-wide claim lock. Two adopters never both
    /// take a folder: the filesystem (the server, on a network filesystem) carries out one rename
    /// of it, and the other is told ENOENT and touches nothing. Only names are returned:
    /// `takeAdopted` reads each when the engine gets to it, so a worker is ready before it has
    /// read a million claims.
    public func adoptOrphans() -> [AdoptedClaim] {
        guard let worker = try? workerFolder(), !worker.isReleased,
              case .success(let probe) = worker.lease.renew() else { return [] }
        var adopted: [AdoptedClaim] = []
        var loose: [String] = []
        let entries = layout.active.entries().filter { !$0.name.hasPrefix(".") }
        var liveness = SpoolLiveness(active: layout.active, settings: worker.lease.settings, probe: probe,
                                     folders: Set(entries.filter(\.isDirectory).map(\.name)),
                                     observations: worker.lease.observations)
        for entry in entries where entry.name != worker.name {
            if entry.isDirectory {
                guard !worker.hasInherited(entry.name) else { continue }
                let owner = SpoolLiveness.owner(of: entry.name)
                guard owner != worker.name, !liveness.isAlive(owner) else { continue }
                adopted += takeOver(entry.name, into: worker)
            } else if entry.isRegular {
                loose.append(entry.name)
            }
        }
        if !loose.isEmpty {
            let moved = (try? worker.names.withLock { folders throws(StoreError) -> [String] in
                loose.compactMap { adoptLoose($0, into: worker, folders: folders) }
            }) ?? []
            // Both sides: btrfs logs only the synced folder's (see `filedCopy`).
            if !moved.isEmpty { try? worker.directory.sync(); try? layout.active.sync() }
            adopted += moved.map { AdoptedClaim(name: $0, folder: worker.directory) }
        }
        return adopted
    }

    /// Whether no other worker is alive on the spool: this worker's folder and lease are made
    /// first, then `active/` is listed. Of two workers starting at the same instant at least one
    /// lists after the other's folder exists, so at most one of them thinks itself alone — and
    /// that one only races a start-up that has not claimed anything yet (the start-up lock makes
    /// even that rare; see ARCHITECTURE "Locks").
    public func noOtherWorkerAlive() -> Bool {
        guard let worker = try? workerFolder(), case .success(let probe) = worker.lease.renew() else { return false }
        let folders = layout.active.entries().filter { $0.isDirectory && !$0.name.hasPrefix(".") }.map(\.name)
        var liveness = SpoolLiveness(active: layout.active, settings: worker.lease.settings, probe: probe, folders: Set(folders),
                                     observations: worker.lease.observations)
        return !folders.contains { folder in
            let owner = SpoolLiveness.owner(of: folder)
            return owner != worker.name && liveness.isAlive(owner)
        }
    }

    /// Takes over dead worker folder `folder` by renaming it to `W~ORIGIN` (W: this worker). The
    /// rename is the decision: a second adopter finds the name gone (ENOENT) and takes nothing.
    /// An empty folder is removed instead of held.
    private func takeOver(_ folder: String, into worker: WorkerFolder) -> [AdoptedClaim] {
        let active = layout.active
        let target = worker.name + "~" + SpoolLiveness.origin(of: folder)
        guard renameat(active.fd, folder, active.fd, target) == 0 else {
            // ENOENT: another adopter won. Anything else: left for the next scan.
            return []
        }
        guard let taken = try? Directory(in: active, name: target) else { return [] }
        var claims: [AdoptedClaim] = []
        for entry in taken.entries() where !entry.name.hasPrefix(".") && entry.isRegular {
            claims.append(AdoptedClaim(name: entry.name, folder: taken))
        }
        // The dead owner's lease, lock and marks mean nothing here any more.
        for dotted in taken.list() where dotted.hasPrefix(".") { _ = unlinkat(taken.fd, dotted, 0) }
        if claims.isEmpty {
            _ = unlinkat(active.fd, target, AT_REMOVEDIR)
            return []
        }
        guard worker.inherit(.init(name: target, directory: taken)) else { return [] }
        try? active.sync()
        return claims
    }

    /// Before a commit point (a publish's renames, a group marker, filing a request): whether the
    /// request `name` is still this worker's. The lease must be fresh (`WorkerLease.confirm`:
    /// renewed now if this worker may have stalled) and the request must lie in a folder this
    /// worker holds, looked up by its path from `active/` — an adopter's rename of the folder
    /// makes that path vanish, whereas the folder's descriptor would still reach it. Throws a
    /// fencing error (`StoreError.isFenced`) when another worker has taken it over, a lease error
    /// when the lease could not be renewed (the spool unreachable: tried again later).
    public func confirmHeld(_ name: String) throws(StoreError) {
        guard let worker = workerSlot.current else { return }
        guard worker.lease.confirm() else {
            if worker.lease.isLost { throw StoreError.fenced(layout.active.path(of: worker.name + "/" + name)) }
            throw StoreError("lease", worker.lease.path, detail: "the lease could not be renewed; nothing is committed until it is")
        }
        var st = stat()
        let held = worker.heldFolders
        for folder in held where fstatat(layout.active.fd, folder + "/" + name, &st, AT_SYMLINK_NOFOLLOW) == 0 {
            return
        }
        // In none of them: fenced when one of this worker's folders is gone from its path (taken
        // over, with the request in it). With every folder in place the request was never
        // claimed here (a tool publishing on its own), and nobody can have taken it over.
        if let gone = held.first(where: { fstatat(layout.active.fd, $0, &st, AT_SYMLINK_NOFOLLOW) != 0 }) {
            throw StoreError.fenced(layout.active.path(of: gone + "/" + name))
        }
    }

    /// Where a claim lies, as a path relative to `active/` ("FOLDER/NAME"): moves out of it go by
    /// that path, so that a folder another worker renamed away fails them with ENOENT.
    func pathInActive(_ claim: ClaimedRequest) -> String {
        (claim.folder.path as NSString).lastPathComponent + "/" + claim.name
    }

    /// Who is told when this worker's lease is found lost (its folder taken over while it was
    /// stalled): the daemon stops at once, publishing and filing nothing more.
    public func onLeaseLost(_ handler: @escaping @Sendable (String) -> Void) {
        workerSlot.setOnLost(handler)
    }

    /// Sets the lease settings for the worker folder made from now on.
    public func setLease(_ settings: LeaseSettings) {
        workerSlot.leaseSettings = settings
    }

    /// What `takeAdopted` found.
    public enum AdoptedRequest {
        case claim(ClaimedRequest)
        /// Its group had ended and it was filed in `done/`, `failed/` or `rejected/`; the claim's
        /// old name, which a power cut kept too, is removed. `inode` names its group journal.
        case filed(name: String, inode: UInt64)
        /// No longer a regular file.
        case gone
    }

    /// Where a claimed request was filed when its group ended or it was rejected: `done/`,
    /// `failed/` or `rejected/` holding the same file (`inode`) under its name or a `-N` of it.
    ///
    /// Why: a move out of a worker's folder is one `rename`, made durable by a sync of the
    /// target folder. On ext4 and XFS the rename's two halves are one journal transaction; on
    /// btrfs the sync logs the new name and a power cut can keep the old one too
    /// (both names, one inode). Adopted as it is, the request would be worked on again and filed
    /// a second time as `R-1`, and its hook could run twice.
    func filedCopy(of name: String, inode: UInt64) -> String? {
        for folder in [layout.done, layout.failed, layout.rejected] {
            // The names `file` passed over: taken by the file or by its `.error`.
            for attempt in 0..<1000 {
                let candidate = attempt == 0 ? name : Self.suffixed(name, attempt, separator: "-")
                let st = folder.status(of: candidate)
                if let st, UInt64(st.st_ino) == inode { return folder.path(of: candidate) }
                if st == nil && !folder.exists(candidate + ".error") { break }
            }
        }
        return nil
    }

    /// Reads an adopted request file as a claim — unless its group had ended and it was filed
    /// (`filedCopy`): then its old name is removed. Only a file with a second link is looked
    /// for there, so a worker adopting a million claims makes no extra system call for them.
    public func takeAdopted(_ adopted: AdoptedClaim) -> AdoptedRequest {
        guard let st = adopted.folder.status(of: adopted.name), (st.st_mode & S_IFMT) == S_IFREG else { return .gone }
        let inode = UInt64(st.st_ino)
        if st.st_nlink > 1, filedCopy(of: adopted.name, inode: inode) != nil {
            adopted.folder.remove(adopted.name)
            try? adopted.folder.sync()
            return .filed(name: adopted.name, inode: inode)
        }
        return .claim(ClaimedRequest(name: adopted.name, inode: inode, folder: adopted.folder, owner: st.st_uid))
    }

    /// A request file lying directly in `active/` (`active/R`, the layout without worker folders,
    /// `flock`ed by its worker): moved into `worker`'s folder when no one holds its lock.
    private func adoptLoose(_ name: String, into worker: WorkerFolder, folders: [String]) -> String? {
        let active = layout.active
        let fd = openat(active.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var byName = stat(), byFD = stat()
        // It may have been finished and moved away between the listing and the lock.
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, fstat(fd, &byFD) == 0,
              fstatat(active.fd, name, &byName, AT_SYMLINK_NOFOLLOW) == 0, byName.st_ino == byFD.st_ino
        else { return nil }
        return try? worker.names.moveIn(name, from: active, at: "", into: worker, folders: folders)
    }

    /// `name` in `folder` as a claim; nil when it is not a regular file. Its text is not read
    /// here: the engine indexes it from the file (`ClaimedRequest.openFile`).
    private func readClaim(_ name: String, in folder: Directory) -> ClaimedRequest? {
        guard let st = folder.status(of: name), (st.st_mode & S_IFMT) == S_IFREG, st.st_nlink == 1 || Self.linkedByOwner(st) else { return nil }
        return ClaimedRequest(name: name, inode: UInt64(st.st_ino), folder: folder, owner: st.st_uid)
    }

    /// Reads a request file of `size` bytes (as `fstat` said; it may have grown) up to `limit`:
    /// one buffer of the file's size, not a fixed chunk, since most request files are tiny.
    static func readRequest(_ fd: Int32, size: off_t, limit: Int, path: String) throws(StoreError) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: min(limit, max(0, Int(size)) + 1))
        var done = 0
        while true {
            if done == result.count {
                guard result.count < limit else { break }
                result += [UInt8](repeating: 0, count: min(limit - result.count, max(4096, result.count)))
            }
            let n = result.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError("read", path)
            }
            if n == 0 { break }
            done += n
        }
        result.removeLast(result.count - done)
        return result
    }

    /// Whether the request `name` with this inode is still claimed by some worker (a consistent
    /// answer: looked up under the claim lock, so an adoption in progress cannot hide it).
    func isClaimed(_ name: String, inode: UInt64?) -> Bool {
        guard let worker = try? workerFolder() else { return layout.active.exists(name) }
        let found = try? worker.names.withLock { folders throws(StoreError) in worker.names.inode(of: name, folders: folders) }
        guard let found else { return false }
        return inode == nil || found == inode
    }
}
