import Foundation

/// Why a filesystem test could not set its filesystem up. Thrown, so the test fails and says so
/// (a test that needs a FUSE or tmpfs mount never passes without one).
public struct MountUnavailable: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// `Tests/FUSE/powercutfs.py` mounted over a backing folder: a FUSE filesystem without rename
/// flags, with a zero `statfs`, an ignored `syncfs`, and a cache of unsynced data that `powerCut()`
/// drops (see the script's header). Needs root, `/dev/fuse`, `fusermount3` and a python3 that
/// imports `pyfuse3` (Debian's `fuse3` and `python3-pyfuse3`).
public final class PowerCutMount: @unchecked Sendable {
    /// The backing folder: what survives a power cut.
    public let backing: String
    public let mountPoint: String
    private let process = Process()
    private let exited = DispatchSemaphore(value: 0)
    private let stderrPath: String
    private var mounted = false

    /// The script, found beside this file in the source tree.
    public static var scriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FUSE/powercutfs.py").path
    }

    /// `$SPOOLFETCH_TEST_PYTHON`, else the first of /usr/bin/python3, python3 on PATH that imports
    /// pyfuse3 (a pyenv python3 on PATH usually does not: Debian's package is for the system one).
    public static func python() throws -> String {
        var candidates = ["/usr/bin/python3", "/usr/local/bin/python3"]
        if let chosen = ProcessInfo.processInfo.environment["SPOOLFETCH_TEST_PYTHON"], !chosen.isEmpty {
            candidates = [chosen]
        }
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) {
            if (try? runTool(candidate, ["-c", "import pyfuse3, trio"])) == 0 { return candidate }
        }
        throw MountUnavailable("no python3 that imports pyfuse3 and trio among \(candidates) "
                               + "(install fuse3 and python3-pyfuse3, or set SPOOLFETCH_TEST_PYTHON)")
    }

    /// Mounts a fresh filesystem at `parent/mnt` over `parent/backing`, within `timeout` seconds.
    public init(in parent: String, timeout: Double = 20) throws {
        guard geteuid() == 0 else { throw MountUnavailable("mounting the FUSE test filesystem needs root (CI runs as root)") }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else {
            throw MountUnavailable("/dev/fuse is missing or not usable: the FUSE tests cannot run here")
        }
        backing = parent + "/backing"
        mountPoint = parent + "/mnt"
        stderrPath = parent + "/powercutfs.stderr"
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)

        let ready = DispatchSemaphore(value: 0)
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: try Self.python())
        process.arguments = [Self.scriptPath, backing, mountPoint]
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        process.standardInput = FileHandle.nullDevice
        let exited = self.exited
        process.terminationHandler = { _ in exited.signal(); ready.signal() }
        try process.run()
        // The script prints "mounted" once pyfuse3.init() returned, i.e. the mount is up.
        let reader = output.fileHandleForReading
        Thread.detachNewThread {
            var seen = Data()
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                seen.append(chunk)
                if String(decoding: seen, as: UTF8.self).contains("mounted") { ready.signal(); break }
            }
        }
        guard ready.wait(timeout: .now() + timeout) == .success, process.isRunning else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            throw MountUnavailable("powercutfs did not mount within \(timeout) s: \(stderrText)")
        }
        mounted = true
    }

    public var stderrText: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// The simulated power cut: the filesystem drops every byte not yet fsynced/fdatasynced.
    /// Synchronous: when this returns, the cut happened (the filesystem answers the magic name
    /// only after dropping its cache).
    public func powerCut() throws {
        var st = stat()
        let r = stat(mountPoint + "/.powercut", &st)
        guard r != 0 && errno == ENOENT, stderrText.contains("power cut") else {
            throw MountUnavailable("the power cut was not acknowledged (stat: \(r), errno \(errno)): \(stderrText)")
        }
    }

    /// Unmounts (fusermount3 -u, else a lazy umount) and waits for the filesystem process to end.
    public func unmount(timeout: Double = 20) throws {
        guard mounted else { return }
        mounted = false
        if (try? Self.runTool("/bin/fusermount3", ["-u", mountPoint])) != 0 {
            _ = try? Self.runTool("/bin/umount", ["-l", mountPoint])
        }
        if exited.wait(timeout: .now() + timeout) != .success {
            kill(process.processIdentifier, SIGKILL)
            _ = try? Self.runTool("/bin/umount", ["-l", mountPoint])
            throw MountUnavailable("powercutfs did not exit within \(timeout) s of the unmount: \(stderrText)")
        }
    }

    deinit { try? unmount() }

    /// Runs a tool to its end; its exit status.
    @discardableResult
    public static func runTool(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}

/// A small tmpfs mounted for one test (root only), unmounted at deinit.
public final class TmpfsMount: @unchecked Sendable {
    public let path: String
    private var mounted = false

    /// `readOnly`: mounted read-only (every write fails with EROFS).
    public init(at path: String, size: String = "64m", readOnly: Bool = false) throws {
        guard geteuid() == 0 else { throw MountUnavailable("mounting a tmpfs needs root (CI runs as root)") }
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let options = "size=\(size)" + (readOnly ? ",ro" : "")
        guard try PowerCutMount.runTool("/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", path]) == 0 else {
            throw MountUnavailable("mount -t tmpfs \(path) failed")
        }
        self.path = path
        mounted = true
    }

    public func unmount() {
        guard mounted else { return }
        mounted = false
        _ = try? PowerCutMount.runTool("/bin/umount", ["-l", path])
    }

    deinit { unmount() }
}
