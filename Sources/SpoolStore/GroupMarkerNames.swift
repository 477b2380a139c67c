import Foundation

/// Group markers' names that a producer can know before the claim (README, "Name collisions").
///
/// A request's group marker is named after the request when its group is the request's own
/// name: its default group, or a `group:` the request file is named after (`add --group G`
/// writes the file `G`, or `G~N` when `G` is used). The claim keeps such a name as it is (it
/// was placed free, under the claim lock, see `place`), and no other group end takes it while
/// the request is queued or claimed (`SpoolStore.chooseGroupMarkerName`), so `add` can print the
/// marker's path before the daemon has seen the file. Any other explicit group takes
/// `GROUP.group.done`, `GROUP-1.group.done`, … in the order the groups end.
public enum GroupMarkerNames {
    /// Whether the marker of `request` (its claimed name) with group `group` is named after the
    /// request: `request` is `group` or `group~N` as the claim names it.
    public static func followRequest(group: String, request: String) -> Bool {
        if request == group { return true }
        // `group~N`, the suffix before the extension as `SpoolStore.suffixed` puts it.
        var search = request.startIndex
        while let tilde = request[search...].firstIndex(of: "~") {
            let digits = request[request.index(after: tilde)...].prefix { $0.isASCII && $0.isNumber }
            if let n = Int(digits), n > 0, !digits.hasPrefix("0") {
                let without = String(request[..<tilde]) + request[digits.endIndex...]
                if without == group && SpoolStore.suffixed(group, n, separator: "~") == request { return true }
            }
            search = request.index(after: tilde)
        }
        return false
    }

    /// Moves `tmp/temp` into `incoming/` under the first of `group`, `group~1`, … that no
    /// request on the spool holds (queued, claimed, or ended: filed in `done/`, `failed/` or
    /// `rejected/`, or its group marker in the final folder) — the name the claim will keep —
    /// holding the spool-wide claim lock, so no claim or group end takes it meanwhile.
    /// Returns the name.
    public static func place(_ temp: String, group: String, layout: SpoolLayout) throws(StoreError) -> String {
        // A producer that cannot even read the lock (another user's spool) places the file all
        // the same: the lock only keeps a claim or a group end from racing this one moment.
        let names = try? ClaimNames(active: layout.active, flags: O_RDONLY)
        func pick(_ folders: [String]) throws(StoreError) -> String {
            for n in 0..<1000 {
                let name = n == 0 ? group : SpoolStore.suffixed(group, n, separator: "~")
                let claimed = layout.active.exists(name) || folders.contains { layout.active.exists($0 + "/" + name) }
                if claimed || layout.done.exists(name) || layout.failed.exists(name)
                    || layout.rejected.exists(name) || layout.final.exists(name + ".group.done") { continue }
                do throws(StoreError) {
                    try layout.tmp.rename(temp, to: name, in: layout.incoming, replace: false)
                    try layout.incoming.sync()
                    return name
                } catch {
                    if error.errno == EEXIST { continue }   // queued already
                    throw error
                }
            }
            throw StoreError("rename", layout.incoming.path(of: group), errno: EEXIST)
        }
        if let names { return try names.withLock { folders throws(StoreError) in try pick(folders) } }
        let folders = layout.active.entries().filter { $0.isDirectory && !$0.name.hasPrefix(".") }.map(\.name)
        return try pick(folders)
    }
}

extension SpoolStore {
    /// `GROUP.group.done`, else `GROUP-N.group.done`: the first free, and not the marker a
    /// request named so will want for its own (it is queued or claimed: `GroupMarkerNames`).
    func chooseGroupMarkerName(_ group: String, request: String, names: ClaimNames,
                                       folders: [String]) throws(StoreError) -> String {
        for attempt in 0..<10_000 {
            let base = attempt == 0 ? group : "\(group)-\(attempt)"
            let name = base + ".group.done"
            if layout.final.exists(name) { continue }
            if base != request && (layout.incoming.exists(base) || names.isTaken(base, folders: folders)) { continue }
            return name
        }
        throw StoreError("create", layout.final.path(of: group + ".group.done"), errno: EEXIST)
    }
}
