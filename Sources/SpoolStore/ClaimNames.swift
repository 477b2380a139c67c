import Foundation

/// The names of claimed requests are unique across the whole spool, not just within one worker
/// folder: staging files, journals and status ids are named after them. `active/.claims.lock`,
/// `flock`ed exclusively, makes "pick a name no folder holds, then move the file in" one step
/// for every worker: claims from `incoming/`, and an adopter's moves out of a dead folder. It is
/// held only for those moments, never while a request is worked on.
final class ClaimNames: @unchecked Sendable {
    let active: Directory
    private let fd: Int32
    /// `flock` does not exclude threads sharing one open file; this does.
    private let local = NSLock()

    static let fileName = ".claims.lock"
    /// How long a claim waits for the spool-wide claim lock before it goes on without it.
    static let longestWait: Double = 2

    /// `flags`: `O_RDONLY` for a producer (`add`) that may not write `active/` (a lock needs no
    /// write access).
    init(active: Directory, flags: Int32 = O_RDWR) throws(StoreError) {
        let fd = active.openShared(Self.fileName, flags: flags)
        guard fd >= 0 else { throw StoreError("open", active.path(of: Self.fileName)) }
        self.active = active
        self.fd = fd
    }

    deinit { close(fd) }

    /// Runs `body` holding the spool-wide claim lock; `body` gets the names of the worker
    /// folders in `active/`, listed under the lock.
    func withLock<T>(_ body: ([String]) throws(StoreError) -> T) throws(StoreError) -> T {
        local.lock()
        defer { local.unlock() }
        // Held for a rename at a time: on a network filesystem a waiter polls (see `FileLock`)
        // rather than trust the lock manager to wake it.
        // A claim is one rename and stays correct without the lock (it only makes a name race
        // rarer): a holder that does not let go for `longestWait` (frozen) is not waited out.
        let held = try FileLock.acquire(fd, LOCK_EX, in: active, path: active.path(of: Self.fileName), longest: 0.05,
                                        giveUpAfter: Self.longestWait)
        defer { if held { _ = flock(fd, LOCK_UN) } }
        let folders = active.entries().filter { $0.isDirectory && !$0.name.hasPrefix(".") }.map(\.name)
        return try body(folders)
    }

    /// Whether `name` is claimed anywhere: directly in `active/` (the layout without worker
    /// folders) or in any worker's folder. Call under the lock for an answer that stays true.
    func isTaken(_ name: String, folders: [String]) -> Bool {
        if active.exists(name) { return true }
        return folders.contains { active.exists($0 + "/" + name) }
    }

    /// The inode of the claim named `name`, wherever it is (nil: not claimed).
    func inode(of name: String, folders: [String]) -> UInt64? {
        if let st = active.status(of: name), (st.st_mode & S_IFMT) == S_IFREG { return UInt64(st.st_ino) }
        for folder in folders {
            if let st = active.status(of: folder + "/" + name) { return UInt64(st.st_ino) }
        }
        return nil
    }

    /// Moves `source/name` into `folder` under `name`, or `name~N` when a claim of that name
    /// exists anywhere on the spool. `from`: where `source` is (nil: not under `active/`, such as
    /// `incoming/`; `""`: `active/` itself; else the name of a worker folder). Call under the
    /// lock. Returns the name it now has, or nil when `source/name` was gone: another worker
    /// took it first.
    ///
    /// The move is a plain `rename`, which the filesystem carries out by name — on a network
    /// filesystem, by the server, so exactly one of two workers that race for a file gets it and
    /// the other is told ENOENT. It never needs to refuse an existing target: the target is this
    /// worker's own folder, which no one else writes, and the name was checked free spool-wide
    /// under the lock. The no-replace methods are wrong here: where rename takes no flags they
    /// fall back to `link`, and a client that still caches a name another client has moved away
    /// links the file it remembers (GlusterFS links by the cached file id): both workers would
    /// hold the request.
    /// `used`: names a request that ended under them still holds (filed in `done/`, `failed/`
    /// or `rejected/`, or its group marker in the final folder); a new claim skips them too, so
    /// a name reused on the next night gets one name — `R~1` — for its files, its markers'
    /// `request` and its group marker alike.
    func moveIn(_ name: String, from source: Directory, at place: String?, into folder: WorkerFolder,
                folders: [String], used: (String) -> Bool = { _ in false }) throws(StoreError) -> String? {
        var suffix = 0
        while true {
            let candidate = suffix == 0 ? name : SpoolStore.suffixed(name, suffix, separator: "~")
            suffix += 1
            if suffix > 1000 { throw StoreError("rename", folder.directory.path(of: name), errno: EEXIST) }
            // A claim moved under its own name already holds that name spool-wide: only this
            // worker's folder is looked at.
            let taken = place != nil && candidate == name
                ? folder.directory.exists(candidate) : isTaken(candidate, folders: folders) || (place == nil && used(candidate))
            if taken { continue }
            do throws(StoreError) {
                // By the folder's path, not its descriptor: a folder another worker took over
                // (renamed away) while this one stalled takes no more claims (ENOENT).
                try source.rename(name, to: folder.name + "/" + candidate, in: active, replace: true)
                return candidate
            } catch {
                if error.errno == ENOENT { return nil }
                throw error
            }
        }
    }
}
