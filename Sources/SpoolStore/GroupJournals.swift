import Foundation

/// `staging/B.INODE.group`: which group marker a request's group end wrote.
struct GroupJournal: Codable {
    var request: String
    var marker: String
}

/// A group hook an earlier run did not get to: its journal's name (`B.INODE.group` in
/// `staging/`), the group marker's path, and the marker as read (nil when unreadable).
public struct PendingGroupHook: Sendable {
    public var journal: String
    public var markerPath: String
    public var marker: GroupMarker?
}

/// What a group end leaves in `staging/` for the next run: its journal (`B.INODE.group`, until
/// the group hook has run) and, when the end was cut short, its items' staging files.
extension SpoolStore {
    /// The group hook has run (or there is none): forget the group.
    public func groupHookDone(_ journal: HeldLock) {
        layout.staging.remove(journal.name)
    }

    /// The group journals of groups that ended in an earlier run: their request — the file whose
    /// inode the journal's name carries — is no longer claimed by any worker. Each comes locked;
    /// one another live worker holds is its own business (its hook is running) and is left out.
    private func endedGroupJournals() -> [(held: HeldLock, journal: GroupJournal)] {
        var ended: [(held: HeldLock, journal: GroupJournal)] = []
        for name in layout.staging.list() where name.hasSuffix(".group") && !name.hasPrefix(".") {
            guard let held = layout.staging.lockExisting(name), let bytes = try? layout.staging.read(name),
                  let journal = SpoolJSON.decode(GroupJournal.self, bytes),
                  !isClaimed(journal.request, inode: Self.journalInode(name)) else { continue }
            ended.append((held, journal))
        }
        return ended
    }

    /// Groups that ended in an earlier run whose hook had not run yet: the journal's name and the
    /// group marker. Each journal is locked only while it is looked at: the hook locks it again
    /// with `relockGroupJournal` when it starts.
    public func pendingGroupHooks() -> [PendingGroupHook] {
        endedGroupJournals().compactMap { pendingHook($0.held, $0.journal) }
    }

    /// The hook still to run for the locked group journal `held`; nil, and the journal removed,
    /// when its group marker is gone (a consumer took it: nothing left to announce).
    private func pendingHook(_ held: HeldLock, _ journal: GroupJournal) -> PendingGroupHook? {
        guard layout.final.exists(journal.marker) else { layout.staging.remove(held.name); return nil }
        let marker = (try? layout.final.read(journal.marker)).flatMap { SpoolJSON.decode(GroupMarker.self, $0) }
        return PendingGroupHook(journal: held.name, markerPath: layout.final.path(of: journal.marker), marker: marker)
    }

    /// The group end of a request an earlier run filed, whose claim's old name survived a power
    /// cut (`takeAdopted` found it and removed it): its items' staging files go, and its pending
    /// hook, if its journal is still there, is returned — what the start does for every group
    /// that ended (`removeStagingOfEndedGroups`, `pendingGroupHooks`), for this one.
    public func finishFiledGroup(_ name: String, inode: UInt64) -> PendingGroupHook? {
        _ = removeItemStaging(of: [name])
        let journalName = Self.stagingBase(name) + ".\(inode).group"
        guard let held = layout.staging.lockExisting(journalName), let bytes = try? layout.staging.read(journalName),
              let journal = SpoolJSON.decode(GroupJournal.self, bytes) else { return nil }
        return pendingHook(held, journal)
    }

    /// Removes the item staging files (`B.N.part`, `B.N.state`, `B.N.voided`) of requests whose group ended in
    /// an earlier run; returns how many. Call before `pendingGroupHooks`, whose hooks remove the
    /// journals this goes by.
    ///
    /// Why: a group end removes them only after the request's move into `done/` or `failed/`,
    /// and without a sync — they must outlive any crash before that move. A kill between the
    /// move and the removal, or a power cut that loses the removal (ext4 keeps its metadata
    /// operations in order, so then the group journal, removed later still, is there too), left
    /// them in `staging/` for good: no later run looked at a request that had ended. A failed
    /// item's part among them can be as large as its body.
    ///
    /// Items are named after their request, and claim names are unique on the spool only while
    /// claimed: once a new request of the same name is claimed, those names are its own. So the
    /// check that no claim has the name, and the removal, hold the spool-wide claim lock: no
    /// request of that name can be claimed, let alone started, in between.
    public func removeStagingOfEndedGroups() -> Int {
        let ended = endedGroupJournals()
        return ended.isEmpty ? 0 : removeItemStaging(of: ended.map(\.journal.request))
    }

    /// Removes the item staging files of the requests `requests`, each only while no request of
    /// its name is claimed (see `removeStagingOfEndedGroups`); returns how many.
    private func removeItemStaging(of requests: [String]) -> Int {
        guard let worker = try? workerFolder() else { return 0 }
        let names = layout.staging.list()
        var removed = 0
        for request in requests {
            let prefix = Self.stagingBase(request) + "."
            let leftovers = names.filter { name in
                guard name.hasPrefix(prefix), let dot = name.lastIndex(of: "."),
                      [".part", ".state", ".cancelled", ".voided"].contains(name[dot...]) else { return false }
                let index = name[name.index(name.startIndex, offsetBy: prefix.count)..<dot]
                return !index.isEmpty && index.allSatisfy { $0.isASCII && $0.isNumber }
            }
            guard !leftovers.isEmpty else { continue }
            try? worker.names.withLock { folders throws(StoreError) in
                guard !worker.names.isTaken(request, folders: folders) else { return }
                for name in leftovers { layout.staging.remove(name) }
                removed += leftovers.count
            }
        }
        return removed
    }

    /// Locks a group journal again for its hook; nil when it is gone or another worker holds it
    /// (that worker runs, or has run, the hook). The name must still be the file locked: a
    /// journal removed by its hook's end between the open and the lock is not taken.
    public func relockGroupJournal(_ name: String) -> HeldLock? {
        guard let held = layout.staging.lockExisting(name) else { return nil }
        var byFD = stat()
        guard fstat(held.fd, &byFD) == 0, let byName = layout.staging.status(of: name),
              byName.st_ino == byFD.st_ino, byName.st_dev == byFD.st_dev else { return nil }
        return held
    }

    /// INODE of a journal named `B.INODE.group`.
    static func journalInode(_ journalName: String) -> UInt64? {
        let parts = journalName.split(separator: ".")
        return parts.count >= 3 ? UInt64(parts[parts.count - 2]) : nil
    }
}
