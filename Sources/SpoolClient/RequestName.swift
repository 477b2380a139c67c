import Foundation
import SpoolStore

/// Which request a name given on the command line stands for. A request file's name is reused
/// (the next night's `nightly`): the daemon claims it as `R~1`, `R~2`, … while an ended request
/// of that name still holds `R` (`SpoolStore.claim`), so the same name then stands for several
/// requests, and a script that waits means the newest — the one it just dropped.
public enum RequestName {
    /// What a name stands for: a claimed or ended request's name, or a request still queued in
    /// `incoming/` (by its inode: its claim may rename it, and a rename keeps the inode).
    public struct Target: Sendable, Equatable {
        /// The request's name on the spool, once known.
        public var name: String?
        /// The inode of `incoming/R` when it was queued at the look: followed into its claim.
        public var queuedInode: UInt64?
    }

    /// The newest request of the name `given`: one queued in `incoming/` (followed by inode);
    /// else the claimed one of that name with the highest `~N`; else the ended one with the
    /// highest `~N`. Nil fields: the name is nowhere on the spool.
    public static func newest(_ given: String, spool: String, finalFolder: String) -> Target {
        // Looked at in the order files move (incoming, active, then the ends): a request moving
        // on while we look is still found.
        if let inode = inode(at: "\(spool)/incoming/\(given)") {
            return Target(name: claimed(given, inode: inode, spool: spool), queuedInode: inode)
        }
        let family = names(given, spool: spool, finalFolder: finalFolder)
        if let live = family.last(where: { isClaimed($0, spool: spool) }) { return Target(name: live) }
        return Target(name: family.last)
    }

    /// The name the request queued as `incoming/given` with `inode` has now, when it was claimed
    /// (it is in `active/` or has ended); nil while it is still queued.
    public static func claimed(_ given: String, inode: UInt64, spool: String) -> String? {
        for name in candidates(given) {
            let paths = claimPaths(name, spool: spool) + endedPaths(name, spool: spool)
            if paths.contains(where: { self.inode(at: $0) == inode }) { return name }
            // Past the names in use: it was not claimed yet.
            if name != given && !paths.contains(where: exists) { return nil }
        }
        return nil
    }

    /// `R`, `R~1`, `R~2`, … as far as the spool holds them (claimed or ended), in order. A claim
    /// takes the first free name, so they follow one another; the first gap ends them (`R`
    /// itself may be gone: a consumer took its records).
    static func names(_ given: String, spool: String, finalFolder: String) -> [String] {
        var found: [String] = []
        for name in candidates(given) {
            let held = isClaimed(name, spool: spool) || endedPaths(name, spool: spool).contains(where: exists)
                || exists("\(finalFolder)/\(name).group.done")
            if held { found.append(name) } else if name != given { break }
        }
        return found
    }

    /// `R`, then `R~1` … `R~999` (the daemon's own limit), named as the daemon names them.
    static func candidates(_ given: String) -> some Sequence<String> {
        (0..<1000).lazy.map { $0 == 0 ? given : SpoolStore.suffixed(given, $0, separator: "~") }
    }

    static func isClaimed(_ name: String, spool: String) -> Bool {
        claimPaths(name, spool: spool).contains(where: exists)
    }

    /// `active/R` (a spool without worker folders) and `active/W/R` for each worker folder.
    static func claimPaths(_ name: String, spool: String) -> [String] {
        let workers = (try? FileManager.default.contentsOfDirectory(atPath: "\(spool)/active")) ?? []
        return ["\(spool)/active/\(name)"] + workers.filter { !$0.hasPrefix(".") }.map { "\(spool)/active/\($0)/\(name)" }
    }

    /// Where an ended request's file is filed.
    static func endedPaths(_ name: String, spool: String) -> [String] {
        ["\(spool)/done/\(name)", "\(spool)/failed/\(name)", "\(spool)/rejected/\(name)"]
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    static func inode(at path: String) -> UInt64? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return UInt64(st.st_ino)
    }
}
