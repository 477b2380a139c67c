import Foundation

/// One folder mounted twice with bindfs (a FUSE passthrough) *without* `--enable-lock-forwarding`:
/// a `flock` taken through one mount does not exclude one taken through the other — the locks
/// lie across mounts exactly as on GPFS, NFS without a lock manager, or CIFS across machines,
/// while renames, links and timestamps are the backing filesystem's, shared by both. `first`
/// and `second` stand for two machines. Root, /dev/fuse and `bindfs` are needed; without them
/// `init` throws `MountUnavailable` and the test fails (CI has them all: TEST_PACKAGES).
public final class BindfsMounts: @unchecked Sendable {
    public let directory: String
    public var backing: String { directory + "/backing" }
    /// Every mount point, `m1` … `mN`.
    public let mountPoints: [String]
    public var first: String { mountPoints[0] }
    public var second: String { mountPoints[1] }
    private var mounted: [String] = []

    public static let tool = "/usr/bin/bindfs"

    /// `count` mounts of one backing folder (two by default: two machines).
    public init(count: Int = 2) throws {
        guard geteuid() == 0 else { throw MountUnavailable("bindfs mounts need root (CI runs as root)") }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else { throw MountUnavailable("/dev/fuse is missing or not usable") }
        guard FileManager.default.isExecutableFile(atPath: Self.tool) else {
            throw MountUnavailable("bindfs is missing: apt-get install bindfs (make test-deps)")
        }
        let directory = try TempSpool.makeScratchFolder(prefix: "spoolfetch-bindfs")
        self.directory = directory
        mountPoints = (1...max(1, count)).map { directory + "/m\($0)" }
        for path in [directory + "/backing"] + mountPoints {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        for mountPoint in mountPoints {
            let log = directory + "/bindfs-\((mountPoint as NSString).lastPathComponent).log"
            // bindfs stays behind as a daemon: it must not inherit the test's descriptors (a
            // daemon's pipe held open would hang whoever waits for its end), so a shell closes
            // every one but 0, 1 and 2 first.
            let script = "for fd in /proc/$$/fd/*; do n=${fd##*/}; [ \"$n\" -gt 2 ] && eval \"exec $n>&-\"; done; exec \(Self.tool) \"$0\" \"$1\""
            let status = try DetachingTool.run("/bin/bash", ["-c", script, directory + "/backing", mountPoint], output: log)
            guard status == 0 else {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                unmount()
                throw MountUnavailable("bindfs \(backing) \(mountPoint) failed (\(status)): \(text)")
            }
            mounted.append(mountPoint)
        }
    }

    /// Unmounts both (lazily if busy) and removes the folder.
    public func unmount() {
        for mountPoint in mounted.reversed() {
            if (try? PowerCutMount.runTool("/bin/fusermount3", ["-u", mountPoint])) != 0 {
                _ = try? PowerCutMount.runTool("/bin/umount", ["-l", mountPoint])
            }
        }
        mounted = []
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { unmount() }
}
