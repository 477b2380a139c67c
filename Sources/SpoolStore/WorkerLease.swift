import Foundation
import Synchronization

/// How often a worker renews its lease, and after how long without a renewal it counts as dead
/// (`--lease-period`, `--lease-timeout`).
public struct LeaseSettings: Sendable, Equatable {
    public var period: Double
    public var timeout: Double

    public init(period: Double = 5, timeout: Double = 30) {
        self.period = period
        self.timeout = timeout
    }
}

/// Whether a lease has expired, judged only by timestamps the filesystem itself wrote.
///
/// Why not the clocks: a worker on another machine stamps nothing itself; the server (or the
/// filesystem below a FUSE passthrough) sets the lease file's mtime when the worker writes it.
/// The judge writes its own lease just before and reads that file's mtime as "now" on the same
/// filesystem: the age is the difference of two stamps from one clock, however far the machines'
/// own clocks are apart.
public enum LeaseJudge {
    /// `lease`: the other worker's lease file's mtime; `probe`: the judge's own lease, just
    /// renewed. Expired when more than `timeout` seconds apart.
    public static func isExpired(lease: timespec, probe: timespec, timeout: Double) -> Bool {
        age(of: lease, at: probe) > timeout
    }

    public static func age(of lease: timespec, at probe: timespec) -> Double {
        Double(probe.tv_sec - lease.tv_sec) + Double(probe.tv_nsec - lease.tv_nsec) / 1e9
    }
}

/// A worker's lease: `active/W/.lease`, rewritten every `period` seconds by a thread of its own
/// (so a busy engine never lets it lapse). Every renewal opens the file by its path from
/// `active/`, never through a kept descriptor: when another worker has taken the folder over (a
/// rename of `active/W`), the path is gone and the renewal fails with ENOENT — the worker learns
/// it was fenced off. A descriptor would have followed the folder to its new name and renewed a
/// lease nobody reads.
///
/// Cost: one small write and one fsync per period per worker.
final class WorkerLease: @unchecked Sendable {
    static let fileName = ".lease"
    /// Left by a clean exit that kept requests: whoever looks next may adopt them at once.
    static let releasedName = ".released"
    /// The renewal thread's name (at most 15 bytes: the kernel's limit).
    public static let threadName = "spoolfetch-leas"

    private let active: Directory
    private let folder: String
    let settings: LeaseSettings
    private struct State {
        var counter: UInt64 = 0
        /// CLOCK_MONOTONIC of the last renewal that reached the filesystem (ns).
        var renewedAt: UInt64 = 0
        var lost = false
        var stopped = false
        var onLost: (@Sendable (String) -> Void)?
    }
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    /// What this worker saw of the others' leases (see `LeaseObservations`).
    let observations = LeaseObservations()

    init(active: Directory, folder: String, settings: LeaseSettings) {
        self.active = active
        self.folder = folder
        self.settings = settings
    }

    var path: String { active.path(of: folder + "/" + Self.fileName) }

    /// Writes the first lease (the file is new).
    func create() throws(StoreError) {
        let fd = openat(active.fd, folder + "/" + Self.fileName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError("open", path) }
        close(fd)
        if case .failure(let error) = renew() { throw error }
    }

    /// Rewrites the lease through its path; its mtime as the filesystem stamped it. ENOENT: the
    /// folder was taken over (or removed) — the lease is lost for good.
    @discardableResult
    func renew() -> Result<timespec, StoreError> {
        let counter = state.withLock { s -> UInt64 in s.counter += 1; return s.counter }
        let fd = openat(active.fd, folder + "/" + Self.fileName, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let error = StoreError("open", path)
            if error.errno == ENOENT { markLost(error) }
            return .failure(error)
        }
        defer { close(fd) }
        var bytes = Array("\(counter) \(ProcessIdentity.mine.text)\n".utf8)
        let written = bytes.withUnsafeMutableBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        var st = stat()
        guard written == bytes.count, fsync(fd) == 0, fstat(fd, &st) == 0 else { return .failure(StoreError("write", path)) }
        bytes.removeAll()
        state.withLock { $0.renewedAt = Self.monotonicNow() }
        return .success(st.st_mtim)
    }

    /// Whether the lease may be relied on for a commit now: renewed within half its timeout by
    /// this process's own clock, or renewed successfully right now. A worker that was frozen
    /// (SIGSTOP, a paused VM) finds its last renewal old and renews first: when its folder was
    /// taken over meanwhile, that fails and nothing is committed.
    func confirm() -> Bool {
        let (lost, renewedAt) = state.withLock { ($0.lost, $0.renewedAt) }
        if lost { return false }
        let age = Double(Self.monotonicNow() &- renewedAt) / 1e9
        if renewedAt != 0 && age < settings.timeout / 2 { return true }
        if case .success = renew() { return true }
        return false
    }

    var isLost: Bool { state.withLock { $0.lost } }

    /// Called once, from the renewal thread or a commit check, when the lease is found lost.
    func setOnLost(_ handler: @escaping @Sendable (String) -> Void) {
        let lostAlready = state.withLock { s -> Bool in s.onLost = handler; return s.lost }
        if lostAlready { handler("the worker folder \(active.path(of: folder)) was taken over by another worker") }
    }

    private func markLost(_ error: StoreError) {
        let handler = state.withLock { s -> (@Sendable (String) -> Void)? in
            guard !s.lost else { return nil }
            s.lost = true
            return s.onLost
        }
        handler?("the worker folder \(active.path(of: folder)) was taken over by another worker (\(error))")
    }

    /// Starts the renewal thread.
    func start() {
        let period = settings.period
        let thread = Thread { [self] in
            // Named for `ps -L` and for the idle test, which tells its wake-ups from the rest.
            Self.nameThisThread()
            while wake.wait(timeout: .now() + period) == .timedOut {
                if state.withLock({ $0.stopped || $0.lost }) { return }
                renew()
            }
        }
        thread.start()
    }

    /// Stops renewing (a clean exit). `released`: requests stay in the folder; a `.released`
    /// mark lets the next worker adopt them without waiting for the lease to run out.
    func stop(released: Bool) {
        let first = state.withLock { s -> Bool in defer { s.stopped = true }; return !s.stopped }
        guard first else { return }
        wake.signal()
        if released {
            let fd = openat(active.fd, folder + "/" + Self.releasedName, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if fd >= 0 { _ = fsync(fd); close(fd) }
        }
    }

    static func monotonicNow() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// The other workers' leases as this worker saw them, and since when (by its own monotonic
/// clock) each has not changed: the second witness of a lapsed lease, beside the mtimes. A
/// network filesystem's client may answer a file's attributes from its cache (a FUSE
/// attribute timeout), so a judge's own fresh lease can show an old mtime; a lease whose text
/// (its counter) has not changed for the timeout, seen by a clock that cannot go back, is
/// lapsed whatever the timestamps say. No clocks of two machines are compared.
final class LeaseObservations: @unchecked Sendable {
    private let seen = Mutex([String: (text: String, since: UInt64)]())

    /// Seconds `owner`'s lease has shown `text` to this worker (0 the first time, or when it changed).
    func unchanged(_ owner: String, text: String) -> Double {
        let now = WorkerLease.monotonicNow()
        return seen.withLock { s in
            if let last = s[owner], last.text == text { return Double(now &- last.since) / 1e9 }
            s[owner] = (text, now)
            return 0
        }
    }
}

/// Who is alive on the spool: the answers of one look at `active/` (one adoption scan, one
/// start-up), so each worker's lease is read once per look.
///
/// A folder in `active/` is `W` (worker W's own) or `O~W` (worker W's requests, taken over by
/// worker O). Its owner is the part before `~`. An owner is dead when
/// - its own folder `active/O` is gone, or it left a `.released` mark (a clean exit with
///   requests left); or
/// - its lease is older than the timeout, judged against `probe` (see `LeaseJudge`); or
/// - (the fast path, for a restart on one machine) its lease names this kernel's boot and this
///   pid namespace, and a process that no longer exists (`ProcessIdentity`): no lock is asked —
///   a lock may lie (a worker on another machine reaching this disk over NFS holds its lock as
///   a POSIX lock, which `flock` here does not see) — and a pid is believed only where it means
///   the same process.
/// Otherwise it is alive. A folder with neither lease nor lock is a worker starting, alive for
/// an hour. A worker of the version before leases (a `.lock`, no `.lease`) is judged by its lock
/// as that version was: run one version across machines.
struct SpoolLiveness {
    let active: Directory
    let settings: LeaseSettings
    /// This worker's own lease, just renewed: "now" on the spool's filesystem.
    let probe: timespec
    /// The folder names listed in `active/`.
    let folders: Set<String>
    /// What the judging worker saw of each lease before (nil for a reader with no worker).
    let observations: LeaseObservations?
    private var known: [String: Bool] = [:]

    init(active: Directory, settings: LeaseSettings, probe: timespec, folders: Set<String>,
         observations: LeaseObservations? = nil) {
        self.active = active
        self.settings = settings
        self.probe = probe
        self.folders = folders
        self.observations = observations
    }

    static func owner(of folder: String) -> String {
        folder.firstIndex(of: "~").map { String(folder[..<$0]) } ?? folder
    }

    static func origin(of folder: String) -> String {
        folder.firstIndex(of: "~").map { String(folder[folder.index(after: $0)...]) } ?? folder
    }

    mutating func isAlive(_ owner: String) -> Bool {
        if let answer = known[owner] { return answer }
        let answer = judge(owner)
        known[owner] = answer
        return answer
    }

    private func judge(_ owner: String) -> Bool {
        guard folders.contains(owner) else { return false }
        if active.exists(owner + "/" + WorkerLease.releasedName) { return false }
        // Opened, not just looked up: close-to-open consistency gives the attributes (and the
        // text) as the server has them now (an NFS client may otherwise answer from its cache).
        let fd = openat(active.fd, owner + "/" + WorkerLease.fileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd >= 0 {
            defer { close(fd) }
            var st = stat()
            if fstat(fd, &st) == 0, LeaseJudge.isExpired(lease: st.st_mtim, probe: probe, timeout: settings.timeout) {
                return false
            }
            var buffer = [UInt8](repeating: 0, count: 512)
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            let text = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : ""
            if let observations, observations.unchanged(owner, text: text) > settings.timeout { return false }
            return !ProcessIdentity.isGone(leaseText: text)
        }
        // No lease: a worker of the version before leases (judged by its lock), or one starting.
        let lock = openat(active.fd, owner + "/" + WorkerFolder.lockName, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        if lock >= 0 {
            defer { close(lock) }
            return flock(lock, LOCK_EX | LOCK_NB) != 0
        }
        guard let st = active.status(of: owner) else { return false }
        return !LeaseJudge.isExpired(lease: st.st_mtim, probe: probe, timeout: max(3600, settings.timeout))
    }
}

/// Which process wrote a lease, as far as this kernel can check it: the boot (boot_id), the pid
/// namespace (its inode) and the pid. A lease naming this boot and this namespace and a pid that
/// no longer exists was written by a process that is certainly gone — a restart on one machine
/// need not wait out the lease. Anything else (another machine, a container's own namespace, no
/// /proc) is left to the lease.
struct ProcessIdentity: Equatable {
    let boot: String
    let pidNamespace: UInt64
    let pid: Int32

    static let mine: ProcessIdentity = {
        var st = stat()
        let namespace = stat("/proc/self/ns/pid", &st) == 0 ? UInt64(st.st_ino) : 0
        return ProcessIdentity(boot: BootID.current ?? "", pidNamespace: namespace, pid: getpid())
    }()

    var text: String { "boot=\(boot) pidns=\(pidNamespace) pid=\(pid)" }

    /// Parses the `key=value` words of a lease's text; nil when one is missing.
    init?(leaseText: String) {
        var fields: [Substring: Substring] = [:]
        for word in leaseText.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            guard let eq = word.firstIndex(of: "=") else { continue }
            fields[word[..<eq]] = word[word.index(after: eq)...]
        }
        guard let boot = fields["boot"], let ns = fields["pidns"].flatMap({ UInt64($0) }),
              let pid = fields["pid"].flatMap({ Int32($0) }) else { return nil }
        self.init(boot: String(boot), pidNamespace: ns, pid: pid)
    }

    init(boot: String, pidNamespace: UInt64, pid: Int32) {
        self.boot = boot
        self.pidNamespace = pidNamespace
        self.pid = pid
    }

    /// Whether the lease's writer is certainly gone (see the type's comment).
    static func isGone(leaseText: String) -> Bool {
        guard let writer = ProcessIdentity(leaseText: leaseText), !mine.boot.isEmpty, mine.pidNamespace != 0,
              writer.boot == mine.boot, writer.pidNamespace == mine.pidNamespace,
              writer.pid > 0, writer.pid != mine.pid else { return false }
        return kill(writer.pid, 0) != 0 && errno == ESRCH
    }
}
