import Foundation
import Synchronization

/// The spool on disk: claims (in `Claims.swift`), staging files, rejection and group completion.
/// Every transition has one commit point, a `rename` (see the state table in README.md).
public struct SpoolStore: Sendable {
    public let layout: SpoolLayout
    /// Request files larger than this are read only this far (+1 byte) and rejected by the parser.
    public let maxRequestBytes: Int
    /// This worker's folder in `active/` (see `WorkerFolder` and `Claims.swift`).
    let workerSlot = WorkerSlot()

    public init(layout: SpoolLayout, maxRequestBytes: Int = 65_536) {
        self.layout = layout
        self.maxRequestBytes = maxRequestBytes
    }

    /// A store whose claims go into `worker`'s folder (instead of one made at the first claim).
    public init(layout: SpoolLayout, maxRequestBytes: Int = 65_536, worker: WorkerFolder) {
        self.init(layout: layout, maxRequestBytes: maxRequestBytes)
        workerSlot.set(worker)
    }

    // MARK: Rejection

    /// Files a claimed request in `rejected/`: the error file first, then the request (commit).
    public func reject(_ claim: ClaimedRequest, _ record: ErrorRecord) throws(StoreError) {
        try confirmHeld(claim.name)
        try file(claim.name, from: claim.folder, at: pathInActive(claim), into: layout.rejected, record: record)
    }

    /// Files an unclaimable entry of `incoming/` (a symlink, a fifo) in `rejected/` without opening it.
    public func rejectUnclaimed(_ name: String, _ record: ErrorRecord) throws(StoreError) {
        try file(name, from: layout.incoming, into: layout.rejected, record: record)
    }

    /// Moves `name` from `source` into `target` under its own name, or with a `-N` suffix if that
    /// name (or its `.error`) is taken, writing `N.error` first when a record is given.
    /// `sync: false` leaves both folders unsynced (the caller syncs them once for many moves).
    /// `at`: the claim's path relative to `active/` (`pathInActive`): the move goes by that path,
    /// so a worker folder another worker has taken over (renamed) fails it with ENOENT.
    @discardableResult
    /// `itemsFrom`: an items file copied beside `N.error` as `N.error.items.jsonl` (named by it).
    func file(_ name: String, from source: Directory, at pathInActive: String? = nil, into target: Directory,
              record: ErrorRecord?, sync: Bool = true, itemsFrom: (Directory, String)? = nil) throws(StoreError) -> String {
        for attempt in 0..<1000 {
            let candidate = attempt == 0 ? name : Self.suffixed(name, attempt, separator: "-")
            if target.exists(candidate) || target.exists(candidate + ".error") { continue }
            if let record {
                var r = record
                r.request = candidate
                if let (folder, itemsName) = itemsFrom {
                    let copy = Self.itemsFileName(of: candidate + ".error")
                    try ItemLinesWriter.copy(itemsName, from: folder, to: target, as: copy)
                    r.itemsFile = copy
                }
                // Durable before the request moves beside it: the move is the commit point.
                try target.writeAtomically(candidate + ".error", SpoolJSON.encode(record: r), replace: false, sync: true)
            }
            do throws(StoreError) {
                if let pathInActive {
                    try layout.active.rename(pathInActive, to: candidate, in: target, replace: false)
                } else {
                    try source.rename(name, to: candidate, in: target, replace: false)
                }
            } catch {
                if record != nil { target.remove(candidate + ".error") }
                if error.errno == EEXIST { continue }
                throw error
            }
            // The target's sync makes the move durable: one rename is one journal transaction
            // for both folders (ext4, xfs) or one synchronous call (NFS). btrfs logs only the
            // synced folder's side: the source's sync removes the old name for good (a crash
            // between the two leaves both, which adoption recognises: `filedCopy`).
            if sync {
                try target.sync()
                try source.sync()
            }
            return candidate
        }
        throw StoreError("rename", target.path(of: name), errno: EEXIST)
    }

    // MARK: Group completion

    /// Ends a request's group: writes `GROUP.group.done` (once — its name is journaled in
    /// `staging/B.INODE.group` first, so a restart finds it instead of writing a second one), then moves
    /// the request into `done/` or, when an item failed, into `failed/` beside its `.error`.
    ///
    /// The journal stays until `groupHookDone` removes it: it is also the record that the group
    /// hook has not run yet, so a crash before the hook ran runs it at the next start
    /// (`pendingGroupHooks`), and never twice once it has.
    ///
    /// The journal comes back locked: while its owner lives, no other worker takes its hook for
    /// one an earlier run left behind.
    /// `failedItems` (over `listedFailuresLimit` failed): their lines, into `MARKER.items.jsonl`
    /// before the marker, copied beside `R.error`.
    public func endGroup(_ claim: ClaimedRequest, marker: GroupMarker, failure: ErrorRecord?,
                         failedItems: FailedItemLines? = nil) throws(StoreError) -> (markerPath: String, journal: HeldLock) {
        // Fencing: no group marker for a request another worker has taken over.
        try confirmHeld(claim.name)
        let journalName = Self.stagingBase(claim.name) + ".\(claim.inode).group"
        let markerName: String
        let journal: HeldLock
        if let bytes = try? layout.staging.read(journalName), let previous = SpoolJSON.decode(GroupJournal.self, bytes),
           layout.final.exists(previous.marker), let held = layout.staging.lockExisting(journalName) {
            markerName = previous.marker
            journal = held
        } else {
            func write(_ markerName: String) throws(StoreError) -> HeldLock {
                var marker = marker
                if let failedItems {   // durable before the marker that names it
                    let writer = try ItemLinesWriter(layout.final, Self.itemsFileName(of: markerName))
                    try failedItems(writer)
                    try writer.finish()
                    marker.itemsFile = Self.itemsFileName(of: markerName)
                }
                // Durable before the marker exists, or a crash could leave a marker nobody knows of.
                let journal = try layout.staging.writeAtomicallyLocked(
                    journalName, SpoolJSON.encode(GroupJournal(request: claim.name, marker: markerName)), sync: true)
                try layout.final.writeAtomically(markerName, SpoolJSON.encode(groupMarker: marker), replace: false, sync: true)
                try layout.final.sync()
                return journal
            }
            let own = claim.name + ".group.done"
            if GroupMarkerNames.followRequest(group: marker.group, request: claim.name) && !layout.final.exists(own) {
                // Its own name, which nobody else takes (`GroupMarkerNames`): no lock needed.
                markerName = own
                journal = try write(own)
            } else {
                // Chosen and written under the claim lock: `add` places a request named after
                // its group under it too, having checked that its marker's name is free.
                let names = try workerFolder().names
                (markerName, journal) = try names.withLock { folders throws(StoreError) in
                    let name = try chooseGroupMarkerName(marker.group, request: claim.name, names: names, folders: folders)
                    return (name, try write(name))
                }
            }
        }
        // On a retry whose move went through (only its folder sync failed), nothing is left to move.
        guard claim.folder.status(of: claim.name).map({ UInt64($0.st_ino) }) == claim.inode else {
            return (layout.final.path(of: markerName), journal)
        }
        if let failure {
            let itemsName = Self.itemsFileName(of: markerName)
            let items = failedItems != nil && layout.final.exists(itemsName) ? (layout.final, itemsName) : nil
            try file(claim.name, from: claim.folder, at: pathInActive(claim), into: layout.failed, record: failure, itemsFrom: items)
        } else {
            try file(claim.name, from: claim.folder, at: pathInActive(claim), into: layout.done, record: nil)
        }
        return (layout.final.path(of: markerName), journal)
    }

    // MARK: Staging

    /// The staging base name of a request (and, with an index, of one of its items): the request
    /// name itself when short, else a prefix plus a hash, so `B.part` always fits in 255 bytes.
    public static func stagingBase(_ request: String, index: Int? = nil) -> String {
        var base = request
        if base.utf8.count > 200 {
            var prefix = ""
            for ch in request {
                if prefix.utf8.count + String(ch).utf8.count > 180 { break }
                prefix.append(ch)
            }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325       // FNV-1a, just to tell long names apart
            for b in request.utf8 { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
            base = prefix + "~" + String(hash, radix: 16)
        }
        if let index { base += ".\(index)" }
        return base
    }

    public func readState(_ base: String) -> ItemState? {
        guard let bytes = try? layout.staging.read(base + ".state") else { return nil }
        return SpoolJSON.decode(ItemState.self, bytes)
    }

    /// Writes `staging/batch-W-N.journal`, the states of one publish batch (`W`: this worker's
    /// folder in `active/`). Its owner removes it once every request it mentions has ended its
    /// group; until then it is what tells an adopter that an item was already published.
    /// The journal is live while worker `W` is (its folder's lock is held), so no descriptor is
    /// kept per journal: the one returned is closed once the batch is durable.
    public func writeJournal(_ states: [ItemState]) throws(StoreError) -> JournalFile {
        let name = "batch-\(try workerFolder().name)-\(JournalCounter.next()).journal"
        return JournalFile(name: name, fd: try layout.staging.writeAtomicallyKeepingOpen(name, SpoolJSON.encode(states: states)))
    }

    /// `W` of `batch-W-N.journal`; nil for another shape.
    static func journalWriter(_ name: String) -> String? {
        guard name.hasPrefix("batch-"), name.hasSuffix(".journal") else { return nil }
        let middle = name.dropFirst("batch-".count).dropLast(".journal".count)
        guard let dash = middle.lastIndex(of: "-"), dash > middle.startIndex else { return nil }
        return String(middle[..<dash])
    }

    /// Whether a live worker (this one included) still needs the journal: the folder of its
    /// writer W (`active/W`, or `active/O~W` once worker O took it over) is held by a live worker
    /// (`SpoolLiveness`) — except a folder this worker holds other than its own, whose journals
    /// are the dead writer's record. A journal of the earlier layout (`batch-PID-N`, no such
    /// folder) is live while it is `flock`ed, as its writer kept it.
    /// `writers` remembers each writer's answer for one listing: a worker leaves hundreds of
    /// journals, and its folder is judged once.
    private func journalIsLive(_ name: String, writers: inout [String: Bool?], liveness: inout SpoolLiveness?) -> Bool {
        guard let writer = Self.journalWriter(name) else { return layout.staging.isLockedByAnother(name) }
        if let known = writers[writer] { return known ?? layout.staging.isLockedByAnother(name) }
        let worker = workerSlot.current
        let live: Bool?
        if worker?.name == writer {
            live = true
        } else if let held = liveness?.folders.first(where: { SpoolLiveness.origin(of: $0) == writer }) {
            let owner = SpoolLiveness.owner(of: held)
            if owner == worker?.name { live = false } else { live = liveness?.isAlive(owner) ?? true }
        } else {
            live = nil     // no such worker folder: the journal's own lock decides
        }
        writers[writer] = live
        return live ?? layout.staging.isLockedByAnother(name)
    }

    /// One look at who is alive, for a reading of the journals: this worker's lease renewed as
    /// the probe (nil when it cannot be: every writer's folder then counts as alive).
    private func currentLiveness() -> SpoolLiveness? {
        let folders = Set(layout.active.entries().filter { $0.isDirectory && !$0.name.hasPrefix(".") }.map(\.name))
        guard let worker = workerSlot.current, case .success(let probe) = worker.lease.renew() else {
            // No worker folder (a reader such as `status --all`): judged against a probe of "now".
            var ts = timespec()
            clock_gettime(CLOCK_REALTIME, &ts)
            return SpoolLiveness(active: layout.active, settings: workerSlot.leaseSettings, probe: ts, folders: folders)
        }
        return SpoolLiveness(active: layout.active, settings: worker.lease.settings, probe: probe, folders: folders,
                             observations: worker.lease.observations)
    }

    /// Item states recorded by publish batches of dead workers (a crash, a kill, a stop with
    /// requests still claimed), by staging base. Journals a live worker needs are skipped unless
    /// `includingLive` (a reader that only looks, such as `status --all`, wants every worker's).
    public func readJournals(includingLive: Bool = false) -> (states: [String: ItemState], files: [String]) {
        var states: [String: ItemState] = [:]
        var files: [String] = []
        var writers: [String: Bool?] = [:]
        var liveness: SpoolLiveness? = includingLive ? nil : currentLiveness()
        for name in layout.staging.list() where name.hasSuffix(".journal") && !name.hasPrefix(".") {
            if !includingLive && journalIsLive(name, writers: &writers, liveness: &liveness) { continue }
            files.append(name)
            guard let bytes = try? layout.staging.read(name, limit: 64 << 20),
                  let list = Self.decodeJournal(bytes) else { continue }
            for state in list {
                let base = Self.stagingBase(state.request, index: state.index)
                states[base] = states[base].map { preferringPublished(state, $0) } ?? state
            }
        }
        return (states, files)
    }

    public func writeState(_ base: String, _ state: ItemState) throws(StoreError) {
        try layout.staging.writeAtomically(base + ".state", SpoolJSON.encode(record: state))
    }

    /// The marker of a data file published as `file` in the final folder.
    public func markerPath(ofPublished file: String) -> String {
        layout.final.path(of: file + ".done")
    }

    /// The marker of the data file published as `file`, when both are in the final folder and the
    /// marker reads as one (what `on-exists: skip-unchanged` takes its validators from).
    public func readMarker(ofPublished file: String) -> ItemMarker? {
        guard layout.final.exists(file), let bytes = try? layout.final.read(file + ".done") else { return nil }
        return SpoolJSON.decode(ItemMarker.self, bytes)
    }

    /// Whether the data file published as `file` has its marker.
    public func hasMarker(ofPublished file: String) -> Bool {
        layout.final.exists(file + ".done")
    }

    /// SHA-256 of the data file published as `file`, read whole through a descriptor that does not
    /// follow a symlink; nil when it cannot be opened or read. For a restart that must still write
    /// a marker for it: the marker's digest is computed from the bytes published.
    public func sha256(ofPublished file: String) -> String? {
        let fd = openat(layout.final.fd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return try? FileClone.sha256(of: fd, path: layout.final.path(of: file)).digest
    }

    /// The full path of a data file published as `file`.
    public func publishedPath(_ file: String) -> String {
        layout.final.path(of: file)
    }

    /// Removes an item's staging files (after its group ended). `voided: false` (an item started
    /// over by a recovery) keeps `B.voided`: the journal line it voids lasts as long as the request.
    public func removeStaging(_ base: String, voided: Bool = true) {
        layout.staging.remove(base + ".part")
        layout.staging.remove(base + ".state")
        if voided { layout.staging.remove(base + ".voided") }
    }

    /// After a crash between the data rename and the marker rename: the published data file of
    /// an item, found by the part's inode among `name`, `name-1`, … in the final folder.
    public func findPublished(name: String, inode: UInt64) -> String? {
        for attempt in 0..<100 {
            let candidate = attempt == 0 ? name : Self.suffixed(name, attempt, separator: "-")
            guard let st = layout.final.status(of: candidate) else { if attempt > 0 { return nil }; continue }
            if UInt64(st.st_ino) == inode { return candidate }
        }
        return nil
    }

    /// Removes temp files a crash left behind (`.X.tmp` written by `writeAtomically`).
    ///
    /// `olderThan`: only temp files not modified for that many seconds — when other workers
    /// are alive (see `WorkerRegistration`), a fresh temp file may be one they are writing.
    public func sweepTemporaries(olderThan age: TimeInterval? = nil) -> Int {
        var removed = 0
        var folders = [layout.staging, layout.done, layout.failed, layout.rejected]
        if layout.final.path != layout.done.path { folders.append(layout.final) }
        let cutoff = age.map { Date().timeIntervalSince1970 - $0 }
        for folder in folders {
            for name in folder.list() where name.hasPrefix(".") && name.hasSuffix(".tmp") {
                if let cutoff {
                    guard let st = folder.status(of: name), Double(st.st_mtim.tv_sec) < cutoff else { continue }
                }
                folder.remove(name)
                removed += 1
            }
        }
        return removed
    }

    /// `name-1.ext` style names: the suffix goes before the extension, so the type stays visible.
    public static func suffixed(_ name: String, _ n: Int, separator: String) -> String {
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            let stem = name[..<dot], ext = name[dot...]
            let candidate = "\(stem)\(separator)\(n)\(ext)"
            if candidate.utf8.count <= 255 { return candidate }
        }
        var stem = name
        while (stem + "\(separator)\(n)").utf8.count > 255 { stem.removeLast() }
        return "\(stem)\(separator)\(n)"
    }
}

/// Numbers journal files within one process.
enum JournalCounter {
    private static let counter = Mutex<Int>(0)
    static func next() -> Int { counter.withLock { $0 += 1; return $0 } }
}

/// The disk as a recovery reads it (`RecoveryFacts.gather`); `publishedFile(of:)` and
/// `preferringPublished` come with the protocol.
///
/// `preferringPublished(_:_:)`:
/// Of two records of one item, the one a restart goes by: `other` when the item was published
/// from it (its part is in the final folder) and not from `preferred`, else `preferred`.
///
/// Why: a record outlives the attempt that wrote it. A worker killed between its batch
/// journal and its rename leaves an entry for a part that is gone; the next worker downloads
/// the item again and journals its own publish, so two dead journals name the item. And a
/// large body's `B.state`, written when its response began, stays until the group ends. Going
/// by the stale record, a restart fetches a published item again and publishes it a second
/// time (as `NAME-1`, under `on-exists: keep-both`).
///
/// Both may name the same published file: the stale record's part was never linked, its
/// inode was freed when its worker died, and the filesystem gave that number to the part of
/// the attempt that was published (ext4 hands out the lowest free inode, and the adopting
/// worker creates that item's part again among its first). Then the record of the file is
/// the one whose size it has, and of two such the later one: a part is linked only once, and
/// the stale record's part was gone before the other was made. Going by the stale record, a
/// restart lists the wrong size and SHA-256 in the group marker (or writes them in the item's
/// marker), which nobody sees until the resource changes between the two attempts.
extension SpoolStore: RecoverySpool {
    public func state(_ base: String) -> ItemState? { readState(base) }

    public func partSHA256(_ base: String) -> String? {
        let fd = openat(layout.staging.fd, base + ".part", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return try? FileClone.sha256(of: fd, path: partPath(base)).digest
    }

    public func publishedSize(_ file: String) -> Int64? {
        layout.final.status(of: file).map { Int64($0.st_size) }
    }
}
