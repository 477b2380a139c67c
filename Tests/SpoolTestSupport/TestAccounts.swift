import Foundation

/// Unprivileged users and groups a test makes (tests run as root in CI) and acts as: the daemon's
/// user, producers, consumers, operators. Names start with `sfT` so they are recognisable; each
/// is removed first if a killed run left it, and removed again by `removeAll` in tearDown.
public final class TestAccounts: @unchecked Sendable {
    public private(set) var users: [String] = []
    public private(set) var groups: [String] = []

    public init() {}

    /// A group `name`, made afresh.
    public func group(_ name: String) throws {
        precondition(name.hasPrefix("sfT"))
        _ = Self.tool("/usr/sbin/groupdel", [name])
        try Self.check("/usr/sbin/groupadd", [name])
        groups.append(name)
    }

    /// A user `name` with a primary group of its own name and the supplementary `groups`, made
    /// afresh; no home, no login shell.
    public func user(_ name: String, groups extra: [String] = []) throws {
        precondition(name.hasPrefix("sfT"))
        _ = Self.tool("/usr/sbin/userdel", [name])
        _ = Self.tool("/usr/sbin/groupdel", [name])
        var arguments = ["--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "--user-group"]
        if !extra.isEmpty { arguments += ["--groups", extra.joined(separator: ",")] }
        try Self.check("/usr/sbin/useradd", arguments + [name])
        users.append(name)
    }

    /// Removes every user, then every group, this object made.
    public func removeAll() {
        for user in users.reversed() {
            _ = Self.tool("/usr/sbin/userdel", [user])
            _ = Self.tool("/usr/sbin/groupdel", [user])
        }
        for group in groups.reversed() { _ = Self.tool("/usr/sbin/groupdel", [group]) }
        users = []
        groups = []
    }

    public static func uid(_ name: String) -> uid_t? { getpwnam(name).map { $0.pointee.pw_uid } }
    public static func gid(_ name: String) -> gid_t? { getgrnam(name).map { $0.pointee.gr_gid } }

    /// The arguments that run a command as `user` with its groups (`setpriv` execs it, so the
    /// process is the command itself): `DaemonProcess.launch(TestAccounts.asUser(U) + [...],
    /// executable: "/usr/bin/setpriv")`.
    public static func asUser(_ user: String) -> [String] {
        ["--reuid", user, "--regid", user, "--init-groups", "--"]
    }

    /// Runs `arguments` as `user` (through setpriv), waited for; its exit status and output.
    @discardableResult
    public static func run(as user: String, _ arguments: [String], timeout: Double = 30) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(asUser(user) + arguments, executable: "/usr/bin/setpriv")
        let status = try p.waitForExit(timeout: timeout)
        return (status, p.stdoutText, p.stderrText)
    }

    /// `sh -c script` as `user`.
    @discardableResult
    public static func shell(as user: String, _ script: String) throws -> (status: Int32, out: String, err: String) {
        try run(as: user, ["/bin/sh", "-c", script])
    }

    @discardableResult
    static func tool(_ path: String, _ arguments: [String]) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }

    static func check(_ path: String, _ arguments: [String]) throws {
        let status = tool(path, arguments)
        guard status == 0 else {
            throw NSError(domain: "TestAccounts", code: Int(status),
                          userInfo: [NSLocalizedDescriptionKey: "\(path) \(arguments.joined(separator: " ")) exited \(status)"])
        }
    }
}
