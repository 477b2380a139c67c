import Foundation
import Synchronization

/// glibc's `struct group` (the name `group` is taken by `SpoolAccounts.group(named:)` here).
private typealias GroupEntry = Glibc.group

/// Users and groups as the system's databases know them (`getpwnam_r`, `getgrnam_r`,
/// `getgrouplist`): who owns a request, who may act on it, whether its owner could read a file.
/// Through glibc's NSS, so LDAP or sssd accounts are seen as the kernel's callers see them.
public enum SpoolAccounts {
    /// A user's name, or its number as text when the passwd database has no entry for it.
    /// Remembered for the process's life: every marker, status line and hook names its request's
    /// owner, and an NSS lookup per publish would read `/etc/passwd` (or ask LDAP) each time.
    public static func userName(_ uid: uid_t) -> String {
        if let known = names.withLock({ $0[uid] }) { return known }
        let name = withPasswd(uid: uid) { $0.map { String(cString: $0.pw_name) } } ?? String(uid)
        names.withLock { $0[uid] = name }
        return name
    }

    private static let names = Mutex<[uid_t: String]>([:])

    /// The uid and primary gid of a user given by name or number; nil when unknown.
    public static func user(named name: String) -> (uid: uid_t, gid: gid_t)? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        if getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil {
            return (entry.pw_uid, entry.pw_gid)
        }
        if let uid = uid_t(name) {
            return withPasswd(uid: uid) { $0.map { ($0.pw_uid, $0.pw_gid) } } ?? (uid, gid_t(uid))
        }
        return nil
    }

    /// A group's gid, given by name or number; nil when unknown.
    public static func group(named name: String) -> gid_t? {
        var entry = GroupEntry()
        var result: UnsafeMutablePointer<GroupEntry>?
        var buffer = [CChar](repeating: 0, count: 65_536)
        if getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil { return entry.gr_gid }
        return gid_t(name)
    }

    /// A group's name, or its number as text.
    public static func groupName(_ gid: gid_t) -> String {
        var entry = GroupEntry()
        var result: UnsafeMutablePointer<GroupEntry>?
        var buffer = [CChar](repeating: 0, count: 65_536)
        if getgrgid_r(gid, &entry, &buffer, buffer.count, &result) == 0, result != nil { return String(cString: entry.gr_name) }
        return String(gid)
    }

    /// Every group `uid` is in (its primary group and its supplementary groups), as a login of
    /// that user would have them; just its number's group when the user is unknown.
    public static func groups(of uid: uid_t) -> [gid_t] {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return [] }
        var count: Int32 = 64
        while true {
            var gids = [gid_t](repeating: 0, count: Int(count))
            var n = count
            if getgrouplist(entry.pw_name, entry.pw_gid, &gids, &n) >= 0 { return Array(gids.prefix(Int(n))) }
            guard n > count, n < 1 << 20 else { return [entry.pw_gid] }
            count = n
        }
    }

    /// Whether `uid` could open a file with this `stat` for reading by its mode bits, as the
    /// kernel decides without ACLs: root may; the owner by the owner's bits only; a member of its
    /// group by the group's bits; anyone else by the others' bits.
    public static func mayRead(_ st: stat, uid: uid_t, groups: [gid_t]) -> Bool {
        if uid == 0 { return true }
        if st.st_uid == uid { return st.st_mode & S_IRUSR != 0 }
        if groups.contains(st.st_gid) { return st.st_mode & S_IRGRP != 0 }
        return st.st_mode & S_IROTH != 0
    }

    /// A mode's permission bits as four octal digits (`0600`), for messages.
    public static func modeText(_ mode: mode_t) -> String {
        String(format: "%04o", Int(mode & 0o7777))
    }

    private static func withPasswd<T>(uid: uid_t, _ body: (passwd?) -> T) -> T {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return body(nil) }
        return body(entry)
    }
}

/// Who wrote a file of a folder, and how long ago: what `control/`'s handler needs of a command.
extension Directory {
    /// Like `read`, with the file's owner and link count from the same descriptor: who wrote a
    /// control command (a file in a sticky folder no one else can replace).
    public func readWithOwner(_ name: String, limit: Int) throws(StoreError) -> (bytes: [UInt8], owner: UInt32, links: Int) {
        let f = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard f >= 0 else { throw StoreError("open", path(of: name)) }
        defer { close(f) }
        var st = stat()
        guard fstat(f, &st) == 0 else { throw StoreError("fstat", path(of: name)) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw StoreError("open", path(of: name), errno: EINVAL, detail: "not a regular file") }
        return (try FileIO.readUpTo(f, limit: limit, path: path(of: name)), st.st_uid, Int(st.st_nlink))
    }

    /// Seconds since `name` was last modified (not following a symlink); nil when it is not there.
    public func secondsSinceModified(_ name: String) -> Int? {
        guard let st = status(of: name) else { return nil }
        return time(nil) - st.st_mtim.tv_sec
    }
}
