import Foundation

/// The spool's folders (README "The spool") and their open descriptors.
///
/// | folder | writer | meaning |
/// |---|---|---|
/// | incoming | producers | request files to claim |
/// | tmp | producers | scratch space for write-then-rename |
/// | active | daemon | claimed requests, one folder per worker (`active/W/R`, see `WorkerFolder`) |
/// | staging | daemon | partial downloads (`B.part`) and their state (`B.state`) |
/// | final | daemon | published files, `NAME.done` markers, group markers (`--final-folder` moves it) |
/// | done | daemon | finished requests |
/// | failed | daemon | requests with a failed item + `R.error` |
/// | rejected | daemon | unparsable or refused requests + `R.error` |
/// | control | `spoolfetch cancel/pause/resume` | command files, answered with `.result` files |
/// | status | daemon | one live status file per daemon (`HOST-PID.json`) |
public final class SpoolLayout: Sendable {
    public static let folderNames = ["incoming", "tmp", "active", "staging", "final", "done", "failed", "rejected",
                                     "control", "status"]

    public let root: String
    public let incoming: Directory
    public let tmp: Directory
    public let active: Directory
    public let staging: Directory
    /// The final folder: `final/` unless configured otherwise. Apart from `done/` by default so a
    /// request named `report` and a published file `report` never take each other's name;
    /// `--final-folder SPOOL/done` gives the old shared layout.
    public let final: Directory
    public let done: Directory
    public let failed: Directory
    public let rejected: Directory
    public let control: Directory
    public let status: Directory
    /// Whether fresh parts may start unnamed here (see `UnnamedPartSupport`).
    let unnamedParts = UnnamedPartSupport()

    /// Creates missing folders (with the root's permissions) and opens them all.
    public init(root: String, finalFolder: String? = nil) throws(StoreError) {
        var rootStat = stat()
        guard stat(root, &rootStat) == 0 else { throw StoreError("stat", root) }
        guard (rootStat.st_mode & S_IFMT) == S_IFDIR else { throw StoreError("stat", root, errno: ENOTDIR) }
        let mode = rootStat.st_mode & 0o7777
        // An overridden final folder is created below; `SPOOL/final` is then left alone.
        for name in Self.folderNames where !(name == "final" && finalFolder != nil) {
            let path = root + "/" + name
            if mkdir(path, mode) == 0 {
                _ = chmod(path, mode)      // mkdir applies the umask; the contract says "the root's permissions"
            } else if errno != EEXIST {
                throw StoreError("mkdir", path)
            }
            // A folder that is a symlink would let writes escape the spool.
            var st = stat()
            guard lstat(path, &st) == 0 else { throw StoreError("lstat", path) }
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw StoreError("lstat", path, errno: ENOTDIR) }
        }
        self.root = root
        incoming = try Directory(opening: root + "/incoming")
        tmp = try Directory(opening: root + "/tmp")
        active = try Directory(opening: root + "/active")
        staging = try Directory(opening: root + "/staging")
        done = try Directory(opening: root + "/done")
        failed = try Directory(opening: root + "/failed")
        rejected = try Directory(opening: root + "/rejected")
        control = try Directory(opening: root + "/control")
        status = try Directory(opening: root + "/status")
        if let finalFolder {
            if mkdir(finalFolder, mode) != 0 && errno != EEXIST { throw StoreError("mkdir", finalFolder) }
            final = try Directory(opening: finalFolder)
        } else {
            final = try Directory(opening: root + "/final")
        }
    }
}
