import Foundation

/// Who may `cancel`, `pause`, `resume` or `retry` a request: its owner (the uid of its file at
/// claim), root, the daemon's own user, or a member of the operators' group. Anyone else is
/// refused and the command changes nothing (the BITS rule: a job is its creator's).
///
/// The caller is the owner of the command file in `control/` (sticky after `spoolfetch init`, so
/// nobody replaces another's command); its groups are the account database's (`getgrouplist`).
public struct VerbPermission: Sendable, Equatable {
    /// The uid the daemon runs as.
    public let daemonUser: UInt32
    /// The operators' group, when one is configured.
    public let operators: UInt32?

    public init(daemonUser: UInt32, operators: UInt32?) {
        self.daemonUser = daemonUser
        self.operators = operators
    }

    /// The rule as the spool at `root` states it, for a client acting without a daemon (`retry`
    /// of a failed request, `cancel` of a dead worker's): the daemon's user is the root's owner,
    /// the operators' group the one `init --operators` recorded.
    public init(spool root: String) {
        var st = stat()
        daemonUser = stat(root, &st) == 0 ? st.st_uid : 0
        operators = SpoolOwnership.operatorsGroup(root: root).flatMap(SpoolAccounts.group(named:))
    }

    /// Why `caller` may not act on a request of `owner`'s (`request`), or nil when it may.
    public func refusal(caller: uid_t, callerGroups: [gid_t], owner: uid_t, request: String, verb: String) -> String? {
        guard !allows(caller: caller, callerGroups: callerGroups, owner: owner) else { return nil }
        return "refused: \(request) belongs to \(SpoolAccounts.userName(owner)); \(SpoolAccounts.userName(caller)) may \(verb) "
            + "only their own requests (root, the daemon's user \(SpoolAccounts.userName(daemonUser))"
            + (operators.map { " and the operators' group \(SpoolAccounts.groupName($0))" } ?? "") + " may act on any)"
    }

    /// Whether `caller` may act on anyone's requests: root, the daemon's user, an operator. A
    /// host belongs to no one: `probe` is theirs, or a caller's whose own request waits on it.
    public func actsForAll(caller: UInt32, callerGroups: [UInt32]) -> Bool {
        caller == 0 || caller == daemonUser || operators.map(callerGroups.contains) == true
    }

    /// Whether `caller`, in `callerGroups`, may act on a request owned by `owner`.
    public func allows(caller: UInt32, callerGroups: [UInt32], owner: UInt32) -> Bool {
        if caller == owner || caller == 0 || caller == daemonUser { return true }
        if let operators, callerGroups.contains(operators) { return true }
        return false
    }
}
