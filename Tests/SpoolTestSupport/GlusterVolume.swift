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
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            _ = try? Self.run(["down", directory], log: log + ".down")
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

    /// Runs the script with its output in `log`. The daemons it starts stay behind (see
    /// `DetachingTool`); the script closes every descriptor it inherits but 0, 1 and 2 first.
    private static func run(_ arguments: [String], log: String) throws -> Int32 {
        try DetachingTool.run("/bin/bash", [script] + arguments, output: log)
    }
}
