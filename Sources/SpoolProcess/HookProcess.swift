import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging

/// One hook run, on the calling thread: `posix_spawn` of `/bin/sh -c COMMAND` in a new process
/// group, its output read line by line into log lines, its time limit enforced on the group.
///
/// Why not Foundation's `Process`: it neither starts a process group (so a hook's children
/// outlived the hook's kill) nor closes the daemon's other descriptors in the child. Why not
/// swift-subprocess: its run ends when the shell exits, cancelling the output reads, so a child the
/// hook leaves behind escapes the time limit and the group kill (docs/ARCHITECTURE.md, "Libraries
/// and why"); here a hook lasts until its output closes or its time is up.
public struct HookProcess {
    /// How a hook ended.
    public enum Outcome: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
        /// Killed past the time limit.
        case timedOut
        case couldNotStart(String)
    }

    /// Seconds between SIGTERM and SIGKILL past the time limit.
    public static let killGrace: Double = 5

    public var command: String
    public var environment: [String: String]
    public var item: String
    public var timeout: Double
    public var logger: Logger
    /// The refresh hook's first stdout line is its answer (a signed URL): handed back, never
    /// logged. Its other lines are logged as any hook's.
    public var capturesFirstLine = false

    public init(command: String, environment: [String: String], item: String, timeout: Double, logger: Logger,
                capturesFirstLine: Bool = false) {
        self.command = command
        self.environment = environment
        self.item = item
        self.timeout = timeout
        self.logger = logger
        self.capturesFirstLine = capturesFirstLine
    }

    /// Longest log line taken from a hook; a longer one is logged in pieces.
    static let maxLine = 4096

    public func run() -> Outcome { runCapturing().outcome }

    /// Runs the hook; `firstLine` is its first stdout line when `capturesFirstLine` (nil when it
    /// printed none).
    public func runCapturing() -> (outcome: Outcome, firstLine: String?) {
        var outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0 else { return (.couldNotStart("pipe: \(String(cString: strerror(errno)))"), nil) }
        guard pipe(&errPipe) == 0 else {
            let why = String(cString: strerror(errno))
            close(outPipe[0]); close(outPipe[1])
            return (.couldNotStart("pipe: \(why)"), nil)
        }
        // The read ends stay in the daemon only (another hook spawned meanwhile closes every
        // descriptor above 2 anyway, see spawn()).
        _ = fcntl(outPipe[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(errPipe[0], F_SETFD, FD_CLOEXEC)
        let spawned = spawn(stdout: outPipe[1], stderr: errPipe[1])
        close(outPipe[1])
        close(errPipe[1])
        guard case .success(let pid) = spawned else {
            close(outPipe[0]); close(errPipe[0])
            if case .failure(let why) = spawned { return (.couldNotStart(why.description), nil) }
            return (.couldNotStart("posix_spawn"), nil)
        }
        logger.debug("hook started", metadata: ["item": "\(item)", "pid": "\(pid)", "command": "\(command)"])
        return supervise(pid: pid, stdout: outPipe[0], stderr: errPipe[0])
    }

    private struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    private func spawn(stdout: Int32, stderr: Int32) -> Result<pid_t, SpawnError> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        // Nothing else of the daemon's: claim locks, journals, libcurl's sockets.
        Self.closeFrom(3, in: &actions)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let merged = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup(command), nil]
        let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp)
        guard status == 0 else { return .failure(SpawnError(description: "posix_spawn /bin/sh: \(String(cString: strerror(status)))")) }
        return .success(pid)
    }

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34+), which Swift's Glibc module does
    /// not declare: found with `dlsym`. Without it (an older glibc), each descriptor open now
    /// above `lowest` gets a close action.
    private static func closeFrom(_ lowest: Int32, in actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, lowest)
            return
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap(Int32.init) where fd >= lowest { posix_spawn_file_actions_addclose(&actions, fd) }
    }

    /// Reads the pipes until both close, enforcing the time limit; then reaps the process.
    private func supervise(pid: pid_t, stdout: Int32, stderr: Int32) -> (outcome: Outcome, firstLine: String?) {
        var firstLine: String? = nil
        var lineTaken = !capturesFirstLine
        func take(_ line: String, _ stream: HookOutputStream) {
            if !lineTaken && stream.name == "stdout" {
                lineTaken = true
                firstLine = line
            } else {
                log(line, stream: stream)
            }
        }
        var streams = [HookOutputStream(fd: stdout, name: "stdout", level: .info),
                       HookOutputStream(fd: stderr, name: "stderr", level: .warning)]
        let clock = ContinuousClock()
        let started = clock.now
        var nextStep = started + .milliseconds(Int64(timeout * 1000))
        enum Phase { case running, terminated, killed, abandoned }
        var phase = Phase.running
        var waitStatus: Int32?
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)

        while true {
            if waitStatus == nil {
                var s: Int32 = 0
                if waitpid(pid, &s, WNOHANG) == pid { waitStatus = s }
            }
            let open = streams.indices.filter { streams[$0].fd >= 0 }
            if open.isEmpty && (waitStatus != nil || phase == .abandoned) { break }
            let remaining = clock.now.duration(to: nextStep)
            var waitMS = remaining <= .zero ? 0 : Int32(min(remaining.components.seconds * 1000
                + remaining.components.attoseconds / 1_000_000_000_000_000 + 1, 60_000))
            // Both pipes closed but the shell still runs (it closed its output): there is no
            // descriptor to wait on, so look again every 50 ms until it exits or its time is up.
            if open.isEmpty { waitMS = min(waitMS, 50) }
            var fds = open.map { pollfd(fd: streams[$0].fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), waitMS)
            if ready < 0 && errno != EINTR { break }
            for (k, index) in open.enumerated() where fds[k].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(streams[index].fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    for line in streams[index].take(buffer[0..<n]) { take(line, streams[index]) }
                } else if n == 0 || (errno != EINTR && errno != EAGAIN) {
                    if let rest = streams[index].finish() { take(rest, streams[index]) }
                    close(streams[index].fd)
                    streams[index].fd = -1
                }
            }
            guard clock.now >= nextStep, waitStatus == nil || !streams.allSatisfy({ $0.fd < 0 }) else { continue }
            switch phase {
            case .running:
                logger.warning("hook over its time limit: SIGTERM to its process group", metadata: [
                    "item": "\(item)", "pid": "\(pid)", "hook-timeout": "\(Self.seconds(timeout))"])
                kill(-pid, SIGTERM)
                phase = .terminated
            case .terminated:
                kill(-pid, SIGKILL)
                phase = .killed
            case .killed, .abandoned:
                // Something outside the group (a daemonised child) still holds the output open.
                for i in streams.indices where streams[i].fd >= 0 { close(streams[i].fd); streams[i].fd = -1 }
                phase = .abandoned
            }
            nextStep = clock.now + .milliseconds(Int64(Self.killGrace * 1000))
        }
        for i in streams.indices where streams[i].fd >= 0 { close(streams[i].fd) }
        if waitStatus == nil {
            var s: Int32 = 0
            while waitpid(pid, &s, 0) < 0 && errno == EINTR {}
            waitStatus = s
        }
        if phase != .running { return (.timedOut, firstLine) }
        let status = waitStatus ?? 0
        if status & 0x7f == 0 { return (.exited((status >> 8) & 0xff), firstLine) }
        return (.signalled(status & 0x7f), firstLine)
    }

    /// `300` rather than `300.0`: the form the config file and the engine's own log lines use.
    private static func seconds(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }

    private func log(_ line: String, stream: HookOutputStream) {
        logger.log(level: stream.level, "hook output", metadata: ["item": "\(item)", "stream": "\(stream.name)", "line": "\(line)"])
    }
}

/// One output pipe of a hook, cut into lines.
struct HookOutputStream {
    var fd: Int32
    let name: String
    let level: Logger.Level
    private var pending: [UInt8] = []

    init(fd: Int32, name: String, level: Logger.Level) {
        self.fd = fd
        self.name = name
        self.level = level
    }

    /// The complete lines in `bytes` (with what was left over before), without their `\n` (and a
    /// `\r` before it); a line longer than `HookProcess.maxLine` comes out in pieces.
    mutating func take(_ bytes: ArraySlice<UInt8>) -> [String] {
        pending += bytes
        var lines: [String] = []
        var start = 0
        var i = 0
        while i < pending.count {
            if pending[i] == UInt8(ascii: "\n") {
                lines.append(Self.text(pending[start..<i]))
                start = i + 1
            } else if i - start + 1 >= HookProcess.maxLine {
                lines.append(Self.text(pending[start...i]))
                start = i + 1
            }
            i += 1
        }
        pending.removeFirst(start)
        return lines
    }

    /// What is left at end of file (a last line without `\n`), if anything.
    mutating func finish() -> String? {
        defer { pending = [] }
        return pending.isEmpty ? nil : Self.text(pending[...])
    }

    private static func text(_ bytes: ArraySlice<UInt8>) -> String {
        var slice = bytes
        if slice.last == UInt8(ascii: "\r") { slice = slice.dropLast() }
        return String(decoding: slice, as: UTF8.self)
    }
}
