import Foundation

/// The spool's folders and their open descriptors. What each folder holds and who writes it is
/// the README's table "The spool (the API)", its one copy; `folderNames` lists them.
public final class SpoolLayout: Sendable {
    public static let folderNames = ["incoming", "tmp", "outgoing", "active", "staging", "final", "done", "failed", "rejected",
                                     "control", "status"]

    public let root: String
    public let incoming: Directory
    public let tmp: Directory
    /// Files to upload (`upload:`); nothing outside it is ever sent.
    public let outgoing: Directory
    public let active: Directory
    public let staging: Directory
    /// The final folder: `final/` unless configured otherwise. Apart from `done/` by default so a
    /// request named `report` and a published file `report` never take each other's name;
    /// `--final-folder SPOOL/done` puts files and request files in one folder.
    public let final: Directory
    public let done: Directory
    public let failed: Directory
    public let rejected: Directory
    public let control: Directory
    public let status: Directory
    /// Whether fresh parts may start unnamed here (see `UnnamedPartSupport`).
    let unnamedParts = UnnamedPartSupport()

    /// Creates missing folders (with the root's permissions) and opens them all. Existing folders
    /// keep their owner and mode (`spoolfetch init`'s): nothing here loosens them.
    public init(root: String, finalFolder: String? = nil) throws(StoreError) {
        var rootStat = stat()
        guard stat(root, &rootStat) == 0 else {
            // Not made here: a typo in --spool would otherwise start a daemon on an empty folder
            // that no producer writes to. Say how to make it instead.
            let e = errno
            throw StoreError("stat", root, errno: e, detail: e == ENOENT
                ? "the spool does not exist; create it with 'mkdir -p \(root)' (owned by the user the daemon runs as; its folders are made at the first start), or pass the right --spool or SPOOLFETCH_SPOOL"
                : nil)
        }
        guard (rootStat.st_mode & S_IFMT) == S_IFDIR else { throw StoreError("stat", root, errno: ENOTDIR) }
        let mode = rootStat.st_mode & 0o7777
        // An overridden final folder is created below; `SPOOL/final` is then left alone.
        for name in Self.folderNames where !(name == "final" && finalFolder != nil) {
            try Self.makeFolder(root + "/" + name, mode: mode)
        }
        self.root = root
        incoming = try Directory(opening: root + "/incoming")
        tmp = try Directory(opening: root + "/tmp")
        outgoing = try Directory(opening: root + "/outgoing")
        active = try Directory(opening: root + "/active")
        staging = try Directory(opening: root + "/staging")
        done = try Directory(opening: root + "/done")
        failed = try Directory(opening: root + "/failed")
        rejected = try Directory(opening: root + "/rejected")
        control = try Directory(opening: root + "/control")
        status = try Directory(opening: root + "/status")
        if let finalFolder {
            try Self.makeFolder(finalFolder, mode: mode, checkType: false)
            final = try Directory(opening: finalFolder)
        } else {
            final = try Directory(opening: root + "/final")
        }
    }

    /// Creates `path` unless it exists; a folder that is a symlink (or not a folder) is refused,
    /// since it would let writes escape the spool.
    ///
    /// Several workers, on several machines, may start on an empty spool at once: EEXIST is
    /// another worker's `mkdir`. On a network filesystem the folder another client is still
    /// creating can look missing to this client for a moment (GlusterFS: `lstat` or `open`
    /// answers ENOENT right after `mkdir` said EEXIST, while the other client's `mkdir` is still
    /// under way); asked again a little later it is there. Bounded: about 10 s in all.
    static func makeFolder(_ path: String, mode: mode_t, checkType: Bool = true) throws(StoreError) {
        var attempt = 0
        while true {
            let step: String
            if mkdir(path, mode) == 0 {
                _ = chmod(path, mode)      // mkdir applies the umask; the contract says "the root's permissions"
            } else if errno != EEXIST {
                throw StoreError("mkdir", path)
            }
            var st = stat()
            if lstat(path, &st) == 0 {
                guard !checkType || (st.st_mode & S_IFMT) == S_IFDIR else { throw StoreError("lstat", path, errno: ENOTDIR) }
                let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                if fd >= 0 { close(fd); return }
                // A folder the caller may not read (a producer and staging/ after `init`) is there.
                if errno == EACCES { return }
                step = "open"
            } else {
                step = "lstat"
            }
            guard errno == ENOENT, attempt < 110 else { throw StoreError(step, path) }
            attempt += 1
            var pause = timespec(tv_sec: 0, tv_nsec: Int(min(attempt, 10)) * 10_000_000)
            _ = nanosleep(&pause, nil)
        }
    }
}
