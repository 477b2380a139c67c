import Foundation

/// A GlusterFS volume mounted twice through FUSE (`Tests/GlusterFS/gluster-volume`): `first` and
/// `second` are two clients of one volume, standing for two machines, each with its own caches.
/// glusterd and the brick run in a network namespace of their own. Root, /dev/fuse and the
/// glusterfs packages are needed; without them `init` throws `MountUnavailable` saying what is
/// missing, and the test fails (CI has them all).
public final class GlusterVolume: @unchecked Sendable {
    public let directory: String
    public var first: String { directory + "/m1" }
    public var second: String { directory + "/m2" }
    private var mounted = false

    private static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("GlusterFS/gluster-volume").path
    }

    public init() throws {
        guard geteuid() == 0 else { throw MountUnavailable("a GlusterFS volume needs root (CI runs as root)") }
        guard FileManager.default.fileExists(atPath: "/dev/fuse") else { throw MountUnavailable("/dev/fuse is missing") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/glusterd") else {
            throw MountUnavailable("glusterd is missing: apt-get install glusterfs-server glusterfs-client (make test-deps)")
        }
        directory = try TempSpool.makeScratchFolder(prefix: "spoolfetch-gluster")
        let log = directory + ".log"
        let status = try Self.run(["up", directory], log: log)
        guard status == 0 else {
            _ = try? Self.run(["down", directory], log: log)
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw MountUnavailable("gluster-volume up failed (\(status)): \(text)")
        }
        mounted = true
    }

    public func unmount() {
        guard mounted else { return }
        mounted = false
        _ = try? Self.run(["down", directory], log: directory + ".log")
        try? FileManager.default.removeItem(atPath: directory)
        try? FileManager.default.removeItem(atPath: directory + ".log")
    }

    deinit { unmount() }

    /// Runs the script with its output in `log`, through `posix_spawn` and `waitpid` rather than
    /// Foundation's `Process`: the daemons the script starts (glusterd, the brick, the FUSE
    /// clients) stay behind, and `Process` waits until every descendant has closed what it
    /// inherited, so it never saw the script end. (The script closes every other descriptor it
    /// inherits before it starts them.)
    private static func run(_ arguments: [String], log: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ["/bin/bash", script] + arguments
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/bin/bash", &actions, nil, &cArgs, environ)
        guard rc == 0 else { throw MountUnavailable("posix_spawn /bin/bash failed: errno \(rc)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw MountUnavailable("waitpid failed: errno \(errno)") }
        }
        // WIFEXITED / WEXITSTATUS are macros.
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
