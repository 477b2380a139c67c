import Foundation

/// The spool as a recovery reads it, one question per fact: the daemon's `Recovery` answers from
/// the disk, the seeded simulator (SpoolCoreTests) from its simulated spool. What the answers
/// mean together — which record an item goes by, which files are read and hashed — is decided
/// once, in `RecoveryFacts.gather` and `preferringPublished`, so the simulator recovers by the
/// daemon's own rules and a change to them is under the seeds.
public protocol RecoverySpool {
    /// `staging/B.state`, when it reads as one.
    func state(_ base: String) -> ItemState?
    /// SHA-256 of `staging/B.part` (nil: unreadable). Asked only when the part could be published again.
    func partSHA256(_ base: String) -> String?
    /// A data file in the final folder among `name`, `name-1`, … with `inode`.
    func findPublished(name: String, inode: UInt64) -> String?
    /// The size of `FINAL/file`; nil when there is none.
    func publishedSize(_ file: String) -> Int64?
    /// `FINAL/file.done` exists.
    func hasMarker(ofPublished file: String) -> Bool
    /// SHA-256 of `FINAL/file` (nil: unreadable). Asked only when a marker is still to be written for it.
    func sha256(ofPublished file: String) -> String?
    /// `staging/B.voided`: the journal record whose published file a recovery removed as unverified.
    func voided(_ base: String) -> ItemState?
}

extension RecoverySpool {
    /// The data file in the final folder an item's record says it was published as: its
    /// `finalName`, else a file among `NAME`, `NAME-1`, … with the record's part inode.
    public func publishedFile(of state: ItemState) -> String? {
        guard let marker = state.marker, let inode = state.inode else { return nil }
        return state.finalName ?? findPublished(name: marker.name, inode: inode)
    }

    /// Of two records of one item, the one a restart goes by (`SpoolStore.preferringPublished`
    /// says why): `other` when the item was published from it and not from `preferred`; of two
    /// naming one file, a `published` one, then the one whose size the file has, then the later;
    /// never one `B.voided` names.
    public func preferringPublished(_ preferred: ItemState, _ other: ItemState) -> ItemState {
        // A record whose file a recovery removed as unverified (`B.voided`) loses to any other.
        if preferred.index == other.index, preferred.request == other.request,
           case let v = voided(SpoolStore.stagingBase(preferred.request, index: preferred.index)),
           preferred.isVoided(by: v) != other.isVoided(by: v) {
            return preferred.isVoided(by: v) ? other : preferred
        }
        guard let otherFile = publishedFile(of: other) else { return preferred }
        guard let preferredFile = publishedFile(of: preferred) else { return other }
        // A record whose batch finished publishing (phase `published`) is the file's.
        if (preferred.phase == .published) != (other.phase == .published) {
            return other.phase == .published ? other : preferred
        }
        guard preferredFile == otherFile, let size = publishedSize(preferredFile),
              let p = preferred.marker, let o = other.marker else { return preferred }
        if (o.bytes == size) != (p.bytes == size) { return o.bytes == size ? other : preferred }
        // The daemon writes every time as `YYYY-MM-DDTHH:MM:SS.mmmZ`: in that one shape, the
        // later time is the greater string.
        guard p.finishedAt.utf8.count == o.finishedAt.utf8.count, p.finishedAt.hasSuffix("Z"),
              o.finishedAt.hasSuffix("Z") else { return preferred }
        return o.finishedAt > p.finishedAt ? other : preferred
    }
}

extension RecoveryFacts {
    /// What `spool` says about item `index` of `request` (staging base `base`): its own `B.state`
    /// or the dead workers' journal entry `journaled` (each only when it names this request and
    /// item), its part (`part`: size and inode, opened by the caller, who keeps it for the plan),
    /// and the published file either record leads to.
    ///
    /// Why the reads are as they are: a large body's `B.state` (phase running) is written when its
    /// response begins and stays until the group ends, while the batch journal that published it
    /// is newer — when the item was published from the journal's part, that record wins. The part
    /// is hashed only when it could be published again (rare: a crash between a batch's journal
    /// and its renames), and a published file without its marker is hashed again (a marker is
    /// written from the bytes in the final folder, not those the journal once hashed).
    public static func gather(request: String, index: Int, base: String, journaled: ItemState?,
                              part: (size: Int64, inode: UInt64)?, markersPerItem: Bool, currentBoot: String?,
                              spool: some RecoverySpool) -> RecoveryFacts {
        func itsOwn(_ state: ItemState?) -> ItemState? {
            guard let state, state.request == request, state.index == index else { return nil }
            return state
        }
        let own = itsOwn(spool.state(base))
        var journaled = itsOwn(journaled)
        // A journal record whose file a recovery removed as unverified (`B.voided`, same marker and
        // part) holds no more: its file gone means nothing was consumed. A later publish differs.
        if let record = journaled, record.isVoided(by: spool.voided(base)) { journaled = nil }
        var state = own ?? journaled
        if let own, own.phase == .running, let journaled { state = spool.preferringPublished(own, journaled) }
        let publishedFile = state.flatMap { spool.publishedFile(of: $0) }
        let markerExists = publishedFile.map { spool.hasMarker(ofPublished: $0) } ?? false
        var partSHA256: String? = nil
        if publishedFile == nil, let state, state.phase == .ready || state.phase == .published, let marker = state.marker,
           let part, part.size == marker.bytes, part.inode == state.inode {
            partSHA256 = spool.partSHA256(base)
        }
        let publishedFileExists = publishedFile.map { spool.publishedSize($0) != nil } ?? false
        var publishedSHA256: String? = nil
        if let publishedFile, publishedFileExists, !markerExists, state?.marker != nil {
            publishedSHA256 = spool.sha256(ofPublished: publishedFile)
        }
        return RecoveryFacts(state: state, partSize: part?.size, partInode: part?.inode, partSHA256: partSHA256,
                             publishedFile: publishedFile, publishedMarkerExists: markerExists,
                             publishedFileExists: publishedFileExists, markersPerItem: markersPerItem,
                             currentBoot: currentBoot, publishedSHA256: publishedSHA256)
    }
}
