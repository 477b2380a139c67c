import Foundation

/// Who owns each folder of a spool shared by several producers, and with which mode: the layout
/// `spoolfetch init` makes (and tightens) and `run` checks at start. The README's table in "A spool
/// for several producers" is this table in words; `SpoolOwnershipTests` checks what `init` makes
/// against it, folder by folder.
///
/// The model is Postfix's queue: producers may only *create* entries, in sticky folders (so none
/// renames or removes another's file); every folder that says what happened — markers, states,
/// filed requests, parts — is the daemon user's alone, and readable by those who need it.
public struct SpoolOwnership: Sendable, Equatable {
    /// One folder: its name under the root ("" is the root itself), owner, group and mode.
    public struct Folder: Sendable, Equatable {
        public let name: String
        public let owner: uid_t
        public let group: gid_t
        public let mode: mode_t
    }

    /// The file beside the folders that names the operators' group for `run` (`init --operators`).
    public static let operatorsFile = "operators"
    /// The folders producers may write (they create entries; the sticky bit keeps each file its owner's).
    public static let producerFolders = ["incoming", "tmp", "outgoing", "control"]
    /// The folders no producer may write: `run` warns when one is writable by its group or others.
    public static let daemonFolders = ["active", "staging", "store", "done", "failed", "rejected", "final"]

    public let folders: [Folder]

    /// The layout for daemon user `user` (its primary group `userGroup`), producers' group
    /// `producers`, consumers' group `consumers` (who read `final/`).
    public init(user: uid_t, userGroup: gid_t, producers: gid_t, consumers: gid_t) {
        // Consumers outside the producers' group must pass through the root to reach final/.
        var list = [Folder(name: "", owner: user, group: producers, mode: consumers == producers ? 0o750 : 0o751)]
        for name in Self.producerFolders {
            // Sticky: only a file's owner (or U) renames or removes it. Setgid: files take the
            // producers' group, so the daemon user, a member of it, can read what mode 0640 allows.
            list.append(Folder(name: name, owner: user, group: producers, mode: 0o3770))
        }
        // Readable by producers (wait, events, status), written by U alone.
        for name in ["active", "done", "failed", "rejected", "status"] {
            list.append(Folder(name: name, owner: user, group: producers, mode: 0o2750))
        }
        list.append(Folder(name: "final", owner: user, group: consumers, mode: 0o2750))
        // Bytes not yet published, and the content store: U's alone.
        for name in ["staging", "store"] {
            list.append(Folder(name: name, owner: user, group: userGroup, mode: 0o700))
        }
        folders = list
    }

    /// Makes the layout at `root`, or tightens an existing spool to it: each folder created when
    /// missing, then owner, group and mode set through a descriptor opened without following a
    /// symlink (a folder replaced by a symlink or a file is refused, never followed). Idempotent.
    /// `operators`: the operators' group name, written to `root/operators` (removed when nil).
    /// Returns what changed, one line per folder, for the command's output.
    public func apply(at root: String, operators: String?) throws(StoreError) -> [String] {
        var changes: [String] = []
        if mkdir(root, 0o700) == 0 { changes.append("\(root): created") } else if errno != EEXIST { throw StoreError("mkdir", root) }
        for folder in folders {
            let path = folder.name.isEmpty ? root : root + "/" + folder.name
            if !folder.name.isEmpty {
                if mkdir(path, 0o700) == 0 { changes.append("\(path): created") } else if errno != EEXIST { throw StoreError("mkdir", path) }
            }
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else {
                let e = errno
                throw StoreError("open", path, errno: e, detail: e == ELOOP || e == ENOTDIR
                    ? "it is not a folder (a symlink or a file took its place); move it away and run init again" : nil)
            }
            defer { close(fd) }
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw StoreError("fstat", path) }
            if st.st_uid != folder.owner || st.st_gid != folder.group {
                guard fchown(fd, folder.owner, folder.group) == 0 else { throw StoreError("fchown", path) }
                changes.append("\(path): owner \(SpoolAccounts.userName(st.st_uid)):\(SpoolAccounts.groupName(st.st_gid)) → "
                               + "\(SpoolAccounts.userName(folder.owner)):\(SpoolAccounts.groupName(folder.group))")
            }
            // fchown clears setgid on some filesystems: the mode is set after it, always.
            guard fstat(fd, &st) == 0 else { throw StoreError("fstat", path) }
            if st.st_mode & 0o7777 != folder.mode {
                guard fchmod(fd, folder.mode) == 0 else { throw StoreError("fchmod", path) }
                changes.append("\(path): mode \(SpoolAccounts.modeText(st.st_mode)) → \(SpoolAccounts.modeText(folder.mode))")
            }
        }
        try writeOperators(operators, root: root, changes: &changes)
        return changes
    }

    private func writeOperators(_ operators: String?, root: String, changes: inout [String]) throws(StoreError) {
        let path = root + "/" + Self.operatorsFile
        guard let operators else {
            if unlink(path) == 0 { changes.append("\(path): removed (no --operators)") }
            return
        }
        if Self.operatorsGroup(root: root) == operators { return }
        let temp = root + "/.operators.tmp"
        _ = unlink(temp)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError("open", temp) }
        let root = folders[0]
        let bytes = Array((operators + "\n").utf8)
        let wrote = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let ok = wrote == bytes.count && fchown(fd, root.owner, root.group) == 0 && fchmod(fd, 0o644) == 0 && fsync(fd) == 0
        let e = errno
        close(fd)
        guard ok else { _ = unlink(temp); throw StoreError("write", temp, errno: e) }
        guard rename(temp, path) == 0 else { throw StoreError("rename", path) }
        changes.append("\(path): operators' group \(operators)")
    }

    /// The operators' group `init --operators` recorded in the spool; nil when none (or the file
    /// is not a plain file of the daemon user's).
    public static func operatorsGroup(root: String) -> String? {
        let fd = open(root + "/" + operatorsFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        // Only a file no producer could have written: the root is the daemon user's.
        var rootStat = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_mode & 0o022 == 0,
              stat(root, &rootStat) == 0, st.st_uid == rootStat.st_uid || st.st_uid == 0,
              let bytes = try? FileIO.readUpTo(fd, limit: 256, path: root) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    /// The folders of a spool a producer must not write that its group or others may write
    /// (`run` warns about each, once, at start): path and mode. `final` is the final folder's
    /// own path (it may be outside the spool); `store` the content store's, when one is used.
    public static func looseFolders(root: String, final finalFolder: String, store: String?) -> [(path: String, mode: mode_t)] {
        var paths = daemonFolders.compactMap { name -> String? in
            switch name {
            case "final": return finalFolder
            case "store": return store
            default: return root + "/" + name
            }
        }
        paths.insert(root, at: 0)
        return paths.compactMap { path in
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & 0o022 != 0 else { return nil }
            return (path, st.st_mode & 0o7777)
        }
    }
}
