import CLinux
import Crypto
import Foundation

/// A wait that did not end in time.
public enum WaitError: Error, CustomStringConvertible {
    case timedOut(what: String, after: Double)
    public var description: String {
        switch self { case .timedOut(let what, let after): return "timed out after \(after) s waiting for \(what)" }
    }
}

/// Test bodies and their digests.
public enum TestBody {
    /// Deterministic pseudo-random bytes (xorshift64*).
    public static func random(count: Int, seed: UInt64) -> [UInt8] {
        var x = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { raw in
            var i = 0
            while i < count {
                x ^= x >> 12; x ^= x << 25; x ^= x >> 27
                var v = x &* 0x2545_F491_4F6C_DD1D
                let n = min(8, count - i)
                withUnsafeBytes(of: &v) { raw.baseAddress!.advanced(by: i).copyMemory(from: $0.baseAddress!, byteCount: n) }
                i += n
            }
        }
        return out
    }

    public static func sha256Hex(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }
}

/// Waits for something to appear in a folder without sleep-polling: the predicate is checked at
/// start and after every inotify event in the folder, with a deadline.
public enum DirectoryWaiter {
    public static func wait(in directory: String, timeout: Double, what: String, until predicate: () -> Bool) throws {
        try wait(inAny: [directory], timeout: timeout, what: what, until: predicate)
    }

    /// The same, woken by an event in any of `directories` (such as the logs of several daemons:
    /// on a network filesystem a folder's inotify sees only this client's changes).
    public static func wait(inAny directories: [String], timeout: Double, what: String, until predicate: () -> Bool) throws {
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { throw WaitError.timedOut(what: "\(what) (inotify_init1 failed: errno \(errno))", after: 0) }
        defer { close(fd) }
        let mask = UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM) | UInt32(IN_MODIFY)
        // A folder may not exist yet (the daemon creates it): then watch its parent until it does.
        var unwatched: [String] = []
        for directory in directories where inotify_add_watch(fd, directory, mask) < 0 {
            _ = inotify_add_watch(fd, (directory as NSString).deletingLastPathComponent, UInt32(IN_CREATE) | UInt32(IN_MOVED_TO))
            if inotify_add_watch(fd, directory, mask) < 0 { unwatched.append(directory) }
        }
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            if predicate() { return }
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { throw WaitError.timedOut(what: what, after: timeout) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, Int32(min(remaining * 1000, 60_000)) + 1)
            _ = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            unwatched.removeAll { inotify_add_watch(fd, $0, mask) >= 0 }
        }
    }

    public static func waitForFile(_ name: String, in directory: String, timeout: Double) throws {
        try wait(in: directory, timeout: timeout, what: "\(directory)/\(name)") {
            FileManager.default.fileExists(atPath: directory + "/" + name)
        }
    }
}

/// The real `spoolfetch` executable as a child process.
public final class DaemonProcess: @unchecked Sendable {
    /// `$SPOOLFETCH_BIN`, else the `spoolfetch` built next to the test bundle.
    public static var executablePath: String {
        if let path = ProcessInfo.processInfo.environment["SPOOLFETCH_BIN"], !path.isEmpty { return path }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("spoolfetch").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("spoolfetch").path
    }

    private let process = Process()
    private let exited = DispatchSemaphore(value: 0)
    private let outputDir: String
    private var reaped = false

    /// The daemon's pid (in a pid namespace of its own, `launch(inNewPIDNamespace:)`: its pid as
    /// seen from here, unshare's child).
    public var pid: Int32 {
        guard ownPIDNamespace else { return process.processIdentifier }
        let wrapper = process.processIdentifier
        let text = (try? String(contentsOfFile: "/proc/\(wrapper)/task/\(wrapper)/children", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.flatMap { Int32($0) } ?? wrapper
    }
    private var ownPIDNamespace = false
    public var stdoutText: String { (try? String(contentsOfFile: outputDir + "/stdout", encoding: .utf8)) ?? "" }
    public var stderrText: String { (try? String(contentsOfFile: outputDir + "/stderr", encoding: .utf8)) ?? "" }
    /// The folder of the daemon's stdout and stderr files, to wait on (`DirectoryWaiter`).
    public var outputDirectory: String { outputDir }

    private init(outputDir: String) { self.outputDir = outputDir }

    /// Runs the daemon inside a network namespace the test made (`ip netns exec NS spoolfetch …`;
    /// `ip` execs the daemon, so the process is the daemon itself).
    public static func launch(inNetworkNamespace namespace: String, _ arguments: [String]) throws -> DaemonProcess {
        try launch(["netns", "exec", namespace, executablePath] + arguments, executable: "/usr/sbin/ip")
    }

    /// The daemon with its open-file limit (soft and hard) set to `openFiles`, through util-linux's
    /// `prlimit`, which execs it: the process is the daemon itself.
    /// The daemon in a pid namespace of its own (`unshare --pid --fork --kill-child`), standing
    /// for a worker on another machine: no pid it writes means anything to the workers outside.
    /// `pid` and `signal` reach the daemon itself once it has started (unshare's only child); its
    /// exit status is the daemon's (unshare passes it on), and a kill of unshare kills it too.
    public static func launch(inNewPIDNamespace arguments: [String]) throws -> DaemonProcess {
        let daemon = try launch(["--pid", "--fork", "--kill-child", "--", executablePath] + arguments,
                                executable: "/usr/bin/unshare")
        daemon.ownPIDNamespace = true
        return daemon
    }

    /// The daemon in a mount namespace of its own where `certificates` is mounted over
    /// `/etc/ssl/certs`: the system's trust store as the test made it, the machine's untouched
    /// (`unshare --mount`, private propagation; the shell execs the daemon).
    public static func launch(trustStore certificates: String, _ arguments: [String]) throws -> DaemonProcess {
        try launch(["--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                    "mount --bind \"$0\" /etc/ssl/certs && exec \"$@\"", certificates, executablePath] + arguments,
                   executable: "/usr/bin/unshare")
    }

    public static func launch(openFiles: Int, _ arguments: [String]) throws -> DaemonProcess {
        try launch(["--nofile=\(openFiles):\(openFiles)", "--", executablePath] + arguments, executable: "/usr/bin/prlimit")
    }

    public static func launch(_ arguments: [String], environment: [String: String] = [:],
                              executable: String? = nil) throws -> DaemonProcess {
        let dir = try makeTempDirectory(prefix: "spoolfetch-proc")
        let daemon = DaemonProcess(outputDir: dir)
        _ = FileManager.default.createFile(atPath: dir + "/stdout", contents: nil)
        _ = FileManager.default.createFile(atPath: dir + "/stderr", contents: nil)
        daemon.process.executableURL = URL(fileURLWithPath: executable ?? executablePath)
        daemon.process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "SPOOLFETCH_SPOOL")
        daemon.process.environment = env.merging(environment) { _, new in new }
        let stdout = FileHandle(forWritingAtPath: dir + "/stdout")
        let stderr = FileHandle(forWritingAtPath: dir + "/stderr")
        daemon.process.standardOutput = stdout
        daemon.process.standardError = stderr
        daemon.process.standardInput = FileHandle.nullDevice
        let semaphore = daemon.exited
        daemon.process.terminationHandler = { _ in semaphore.signal() }
        try daemon.process.run()
        // The child has its own copies. Foundation keeps the Process (and these handles) alive
        // past the test, so without closing them each launch left two descriptors open in the
        // test process: hundreds over the suite, until an in-process inotify watcher got one
        // past FD_SETSIZE and libinotifytools' select() aborted the whole run.
        try? stdout?.close()
        try? stderr?.close()
        return daemon
    }

    /// Waits until the daemon's stderr contains `text` (woken by writes to the log file).
    public func waitForStderr(containing text: String, timeout: Double) throws {
        try DirectoryWaiter.wait(in: outputDir, timeout: timeout, what: "'\(text)' in the daemon's log") {
            self.stderrText.contains(text)
        }
    }

    /// Waits until the process's stderr satisfies `predicate` (woken by writes to the log file).
    /// For a condition on the log, wait here rather than on a spool folder: the folder may not
    /// change after the log does, and the wait would then only end at its deadline.
    public func waitForStderr(timeout: Double, what: String, until predicate: @escaping (String) -> Bool) throws {
        try DirectoryWaiter.wait(in: outputDir, timeout: timeout, what: what) { predicate(self.stderrText) }
    }

    /// Waits until the process's stdout satisfies `predicate` (woken by writes to the output file).
    public func waitForStdout(timeout: Double, what: String, until predicate: @escaping (String) -> Bool) throws {
        try DirectoryWaiter.wait(in: outputDir, timeout: timeout, what: what) { predicate(self.stdoutText) }
    }

    /// Exit status, or 128 + signal.
    public func waitForExit(timeout: Double) throws -> Int32 {
        if !reaped {
            guard exited.wait(timeout: .now() + timeout) == .success else {
                throw WaitError.timedOut(what: "spoolfetch (pid \(pid)) to exit; stderr:\n\(stderrText)", after: timeout)
            }
            reaped = true
        }
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    public func signal(_ sig: Int32) {
        if process.isRunning { kill(pid, sig) }
    }

    public func terminate() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        if !reaped { _ = try? waitForExit(timeout: 10) }
    }

    deinit {
        terminate()
        if ProcessInfo.processInfo.environment["SPOOLFETCH_KEEP_TEST_DIRS"] == nil {
            try? FileManager.default.removeItem(atPath: outputDir)
        }
    }

    /// `spoolfetch run --once --spool SPOOL …` (or another drain `mode`, such as `--due`), waited for.
    public static func drain(spool: String, extra: [String] = [], mode: String = "--once",
                             timeout: Double = 60) throws -> (status: Int32, stderr: String) {
        let daemon = try launch(["run", mode, "--spool", spool] + extra)
        let status = try daemon.waitForExit(timeout: timeout)
        return (status, daemon.stderrText)
    }
}

func makeTempDirectory(prefix: String) throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw CocoaError(.fileWriteUnknown)
    }
    return String(cString: made)
}

/// A fresh spool root in a temp folder; removed at deinit unless SPOOLFETCH_KEEP_TEST_DIRS is set.
public final class TempSpool: @unchecked Sendable {
    public let root: String

    public init() throws {
        root = try makeTempDirectory(prefix: "spoolfetch-test")
        for folder in ["incoming", "tmp"] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
    }

    /// A spool at a given place (on a test filesystem), created with its `incoming/` and `tmp/`.
    public init(root: String) throws {
        self.root = root
        for folder in ["incoming", "tmp"] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
    }

    /// A fresh temp folder (for mounts and other test scaffolding), not removed automatically.
    public static func makeScratchFolder(prefix: String) throws -> String {
        try makeTempDirectory(prefix: prefix)
    }

    deinit {
        if ProcessInfo.processInfo.environment["SPOOLFETCH_KEEP_TEST_DIRS"] == nil {
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    public func path(_ folder: String, _ name: String? = nil) -> String {
        name.map { "\(root)/\(folder)/\($0)" } ?? "\(root)/\(folder)"
    }

    /// As a cron job does it: write `tmp/.NAME.tmp`, fsync, rename into `incoming/NAME`.
    public func drop(_ name: String, _ text: String) throws {
        let temp = path("tmp", ".\(name).tmp")
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw CocoaError(.fileWriteUnknown) }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        fsync(fd)
        close(fd)
        guard written == bytes.count, rename(temp, path("incoming", name)) == 0 else { throw CocoaError(.fileWriteUnknown) }
    }

    public func files(in folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path(folder))) ?? []).sorted()
    }

    /// Request files that have ended: filed in `done/`, or in `failed/` (each beside its `.error`).
    public func endedRequestCount() -> Int {
        files(in: "done").count + files(in: "failed").filter { !$0.hasSuffix(".error") }.count
    }

    /// What a run left in a folder: every file but the lock files that stay on purpose,
    /// `staging/.workers.lock` and `staging/.startup.lock` (see `WorkerRegistration`) and
    /// `active/.claims.lock` (see `ClaimNames`).
    public func leftovers(in folder: String) -> [String] {
        let kept: Set<String> = folder == "staging" ? [".workers.lock", ".startup.lock"] : folder == "active" ? [".claims.lock"] : []
        return files(in: folder).filter { !kept.contains($0) }
    }

    /// The names of the claimed requests, sorted, whichever worker's folder (`active/W/R`) holds
    /// them (or `active/R`, the old layout).
    public func claimed() -> [String] {
        var names: [String] = []
        for entry in files(in: "active") where !entry.hasPrefix(".") {
            var isFolder: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path("active", entry), isDirectory: &isFolder)
            names += isFolder.boolValue ? files(in: "active/" + entry).filter { !$0.hasPrefix(".") } : [entry]
        }
        return names.sorted()
    }

    public func read(_ folder: String, _ name: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path(folder, name)) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path(folder, name)])
        }
        return [UInt8](data)
    }
}
