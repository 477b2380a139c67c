import Foundation
import Synchronization

/// This worker's folder in `active/`: `active/W/` (W = HOST-PID-RANDOM, never reused), which holds
/// every request the worker has claimed. The worker proves it is alive by its lease,
/// `active/W/.lease`, rewritten every lease period (see `WorkerLease`); a worker whose lease has
/// not been renewed for the lease timeout is dead, and its folder passes whole to the one worker
/// whose rename of it (`active/W` → `active/ADOPTER~W`) the filesystem carries out
/// (`SpoolStore.adoptOrphans`). The worker also holds an exclusive `flock` on `active/W/.lock` for
/// its whole life, for workers of the version before leases, which judge by it; no worker of this
/// version asks a lock who lives.
///
/// The lease is written before the lock file appears, and the lock file is created and locked as
/// `.lock.new` and only then renamed to `.lock`, so an older worker never finds `.lock` unlocked
/// while its worker lives. A folder with neither is a worker still starting (or one that died while
/// starting): it holds no request either way.
public final class WorkerFolder: @unchecked Sendable {
    /// W: the folder's name in `active/`.
    public let name: String
    /// `active/W/`.
    public let directory: Directory
    /// The spool-wide lock under which names are chosen and requests moved into worker folders.
    let names: ClaimNames
    private let lockFD: Int32
    private let released = Mutex(false)
    /// Dead workers' folders taken over whole (see `inherit`), now named `W~ORIGIN`.
    private let inherited = Mutex<[InheritedFolder]>([])
    /// This worker's lease (see `WorkerLease`).
    let lease: WorkerLease

    /// The liveness lock inside each worker folder.
    public static let lockName = ".lock"
    static let newLockName = ".lock.new"

    /// Creates `active/W/` (with `active/`'s permissions), writes its lease, takes its lock, and
    /// starts renewing the lease.
    public init(layout: SpoolLayout, lease settings: LeaseSettings = LeaseSettings()) throws(StoreError) {
        let active = layout.active
        var st = stat()
        guard fstat(active.fd, &st) == 0 else { throw StoreError("fstat", active.path) }
        let mode = st.st_mode & 0o7777
        let host = Self.plainHostName()
        var chosen: String?
        for _ in 0..<100 {
            let candidate = "\(host)-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
            if mkdirat(active.fd, candidate, mode) == 0 { chosen = candidate; break }
            if errno != EEXIST { throw StoreError("mkdir", active.path(of: candidate)) }
        }
        guard let name = chosen else { throw StoreError("mkdir", active.path(of: "\(host)-\(getpid())-…"), errno: EEXIST) }
        _ = fchmodat(active.fd, name, mode, 0)      // mkdir applies the umask; keep the spool's permissions
        let directory: Directory
        do { directory = try Directory(in: active, name: name) } catch { _ = unlinkat(active.fd, name, AT_REMOVEDIR); throw error }
        let lease = WorkerLease(active: active, folder: name, settings: settings)
        do { try lease.create() } catch {
            _ = unlinkat(directory.fd, WorkerLease.fileName, 0)
            _ = unlinkat(active.fd, name, AT_REMOVEDIR)
            throw error
        }
        let fd = openat(directory.fd, Self.newLockName, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let error = StoreError("open", directory.path(of: Self.newLockName))
            _ = unlinkat(active.fd, name, AT_REMOVEDIR)
            throw error
        }
        // Exclusive (and writable, which NFS needs for it) before anyone can find it as `.lock`.
        guard flock(fd, LOCK_EX | LOCK_NB) == 0,
              renameat(directory.fd, Self.newLockName, directory.fd, Self.lockName) == 0 else {
            let error = StoreError("flock/rename", directory.path(of: Self.newLockName))
            close(fd)
            _ = unlinkat(directory.fd, Self.newLockName, 0)
            _ = unlinkat(directory.fd, WorkerLease.fileName, 0)
            _ = unlinkat(active.fd, name, AT_REMOVEDIR)
            throw error
        }
        let names: ClaimNames
        do {
            names = try ClaimNames(active: active)
            try active.sync()
        } catch {
            close(fd)
            _ = unlinkat(directory.fd, Self.lockName, 0)
            _ = unlinkat(directory.fd, WorkerLease.fileName, 0)
            _ = unlinkat(active.fd, name, AT_REMOVEDIR)
            throw error
        }
        self.name = name
        self.directory = directory
        self.lockFD = fd
        self.names = names
        self.lease = lease
        lease.start()
    }

    /// Lets go of the folder (a clean exit): removes it when no request is left in it, then
    /// releases the lock. Requests still in it (a stop with work outstanding) stay, and are
    /// adopted by the next worker that looks (at once: the lease is marked released). Nothing is
    /// claimed into this folder afterwards.
    public func release() {
        let first = released.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        var kept = false
        for folder in inherited.withLock({ $0 }) where !Self.removeIfEmpty(folder.name, folder.directory, active: names.active) {
            kept = true
        }
        // The own folder last: while it is there, its lease says whose the `W~ORIGIN` folders are.
        lease.stop(released: kept || !directory.list().allSatisfy({ $0.hasPrefix(".") }))
        _ = Self.removeIfEmpty(name, directory, active: names.active)
        close(lockFD)
    }

    /// Nobody else adds to a folder this worker holds, so "empty" stays true. Whether it went.
    @discardableResult
    static func removeIfEmpty(_ name: String, _ directory: Directory, active: Directory) -> Bool {
        guard directory.list().allSatisfy({ $0.hasPrefix(".") }) else { return false }
        for dotted in directory.list() { _ = unlinkat(directory.fd, dotted, 0) }
        return unlinkat(active.fd, name, AT_REMOVEDIR) == 0
    }

    /// A dead worker's folder, renamed by this worker to `active/NAME/` (`W~ORIGIN`): its requests
    /// are this worker's claims where they lie. Taking over the folder costs one rename and no
    /// rename per request — a restart on a million claims is ready as fast as it can list them.
    struct InheritedFolder {
        let name: String
        let directory: Directory
    }

    /// Holds `folder` until `release()`; false when this folder was released already (the
    /// folder then stays for the next worker).
    func inherit(_ folder: InheritedFolder) -> Bool {
        released.withLock { done in
            guard !done else { return false }
            inherited.withLock { $0.append(folder) }
            return true
        }
    }

    /// Whether `name` is a folder this worker has taken over.
    func hasInherited(_ name: String) -> Bool {
        inherited.withLock { list in list.contains { $0.name == name } }
    }

    /// The names of the folders this worker holds in `active/`: its own first.
    var heldFolders: [String] { [name] + inherited.withLock { $0.map(\.name) } }

    /// Forgets an inherited folder that is empty now (removed) or was taken from this worker.
    func forget(_ folder: String) {
        inherited.withLock { $0.removeAll { $0.name == folder } }
    }

    /// Whether `release()` has run: a released folder takes no claims.
    var isReleased: Bool { released.withLock { $0 } }

    deinit { release() }

    /// The host name as one path component that never starts with a dot.
    static func plainHostName() -> String {
        let raw = ProcessInfo.processInfo.hostName
        var cleaned = String(raw.map { $0 == "/" || $0 == "~" ? "_" : $0 }.prefix(64))
        while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        return cleaned.isEmpty ? "host" : cleaned
    }
}
