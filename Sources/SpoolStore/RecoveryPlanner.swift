import Foundation
import SpoolRequest

/// What the spool says about one item of an adopted request (a dead worker's, or this worker's
/// from before a crash). Gathered by `RecoveryFacts.gather` through a `RecoverySpool` (the daemon's
/// `Recovery` reads the disk, the simulator its simulated spool); the planner itself does no I/O.
/// In SpoolStore, beside the records it reads, so that the daemon and the seeded simulator
/// (SpoolCoreTests) recover with the one planner.
public struct RecoveryFacts: Equatable {
    /// `staging/B.state`, else the item's entry in a dead worker's publish journal — only when it
    /// names this request and item. A resume state (phase running) gives way to a journal entry
    /// the item was published from, and of several journal entries that one wins
    /// (`SpoolStore.preferringPublished`).
    public var state: ItemState?
    /// Size of `staging/B.part`; nil when there is none.
    public var partSize: Int64?
    /// Inode of `staging/B.part`: whether it is the part `state` describes, or one of a later
    /// attempt whose bytes nobody has verified against `state`'s marker.
    public let partInode: UInt64?
    /// SHA-256 of `staging/B.part`, read only when the part could be published again (it has the
    /// record's inode and the marker's size). The inode alone does not prove the part is the
    /// record's: a filesystem gives a freed inode to the next file at once (ext4 does), so a
    /// part of a later attempt can carry the number of the record's part, which died unlinked.
    public let partSHA256: String?
    /// The data file in the final folder this item was published as: the state's `finalName`, else
    /// a file among `NAME`, `NAME-1`, … with the part's inode. nil when none is found.
    public var publishedFile: String?
    /// `FINAL/publishedFile.done` exists.
    public var publishedMarkerExists: Bool
    /// `FINAL/publishedFile` exists (found by inode it does; named by a journal line it may be
    /// gone: a consumer took it).
    public let publishedFileExists: Bool
    /// The request writes per-file markers (`markers: item`). Under `markers: group` the data
    /// file found under its final name (by the journal's `finalName` or the part's inode) is
    /// itself the proof of publication: its data was durable before it was renamed there.
    public var markersPerItem = true
    /// The boot this one is (`BootID.current`): a running state written in another boot holds
    /// only its synced prefix (`ItemState.syncedBytes`).
    public var currentBoot: String? = nil
    /// SHA-256 of `FINAL/publishedFile`, read only when a marker must still be written for it from
    /// the journal (its own `.done`, or its line in the group marker under `markers: group`): the
    /// digest in a marker is computed from the bytes published, and after a crash those are the
    /// bytes in the final folder, not the ones the journal once hashed. nil when unread or unreadable.
    public var publishedSHA256: String? = nil

    public init(state: ItemState?, partSize: Int64?, partInode: UInt64?, partSHA256: String?, publishedFile: String?,
                publishedMarkerExists: Bool, publishedFileExists: Bool, markersPerItem: Bool = true,
                currentBoot: String? = nil, publishedSHA256: String? = nil) {
        self.state = state; self.partSize = partSize; self.partInode = partInode; self.partSHA256 = partSHA256
        self.publishedFile = publishedFile; self.publishedMarkerExists = publishedMarkerExists
        self.publishedFileExists = publishedFileExists; self.markersPerItem = markersPerItem
        self.currentBoot = currentBoot; self.publishedSHA256 = publishedSHA256
    }
}

/// How to pick an adopted item up again (the "after a crash" column of the state table).
public enum RecoveryPlan: Equatable {
    /// Nothing usable: remove its staging files and queue it afresh.
    case startOver
    /// Queue it; the next attempt resumes the kept part with `Range` + `If-Range`.
    case resume(bytes: Int64, etag: String?, lastModified: String?)
    /// It had failed for good: it ends failed again, with the same record.
    case failed(ItemFailure)
    /// Data and marker are both in place: it ends published.
    case published(file: String)
    /// The data was renamed into place but its marker was not written: write the marker only.
    case writeMarker(file: String, marker: ItemMarker)
    /// The part is complete and verified (its size matches the marker): publish it again.
    case publishPart(marker: ItemMarker)
    /// A data file in the final folder, without its marker, whose bytes do not hash to the digest
    /// its journal recorded: nothing may vouch for it. It is removed and the item starts over.
    case discardUnverified(file: String, expected: String, found: String?)
}

/// From plain facts to a recovery plan. Every row of the README's state table that a restart
/// can find has a case here and a unit test.
///
/// | `B.state` / journal phase | other facts | plan |
/// |---|---|---|
/// | none, or another request's | — | startOver |
/// | failed | with its failure | failed |
/// | failed | no failure recorded | startOver |
/// | ready / published | no marker facts | startOver |
/// | published (a journal line names its final file) | the file gone | published (a consumer took file and marker) |
/// | ready / published | data file found, its marker exists | published |
/// | ready / published | data file found, no marker, its bytes not of the journaled SHA-256 | discardUnverified |
/// | ready / published | `markers: group`, data file found, its SHA-256 the journaled one | published |
/// | ready / published | data file found, no marker, its SHA-256 the journaled one | writeMarker |
/// | ready / published | no data file, the record's own part (same inode), as large as the marker says, with its SHA-256 | publishPart |
/// | ready / published | no data file, part missing, of another size or digest, or of another attempt | startOver |
/// | running, written in this boot | validator (a strong ETag or Last-Modified) and a non-empty part | resume from the part's end |
/// | running, written in another boot (a power cut or reboot since) | validator, and a synced prefix of the part | resume from the synced prefix (the rest is cut off) |
/// | running, segmented, written in this boot, its ranges in order after its prefix and within the part | validator | resume from the prefix, keeping each range's written bytes |
/// | running, segmented, otherwise | validator, and a synced prefix of the part | resume from the synced prefix (the rest is cut off) |
/// | running | otherwise | startOver |
///
/// Attempts carry over in every plan but `startOver` of an item without a state.
public enum RecoveryPlanner {
    public static func plan(_ facts: RecoveryFacts) -> RecoveryPlan {
        guard let state = facts.state else { return .startOver }
        switch state.phase {
        case .failed:
            guard let failure = state.failure else { return .startOver }
            return .failed(failure)
        case .ready, .published:
            guard let marker = state.marker else { return .startOver }
            if let file = facts.publishedFile {
                if facts.publishedMarkerExists { return .published(file: file) }
                // A marker is still to be written for it (its own, or its group-marker line): only
                // for bytes that hash, now, to what the journal recorded.
                if facts.publishedFileExists, facts.publishedSHA256 != marker.sha256 {
                    return .discardUnverified(file: file, expected: marker.sha256, found: facts.publishedSHA256)
                }
                if !facts.markersPerItem { return .published(file: file) }
                // Phase `published` (a journal line names the file) and the file gone: a consumer
                // took it, and it takes a file only once its marker is there.
                if state.phase == .published && !facts.publishedFileExists { return .published(file: file) }
                return .writeMarker(file: file, marker: marker)
            }
            // Only the part the record was journaled with: a part of a later attempt (downloaded
            // again after a crash, then interrupted) has bytes the marker's hash does not vouch for.
            if let size = facts.partSize, size == marker.bytes, let inode = state.inode, facts.partInode == inode,
               facts.partSHA256 == marker.sha256 {
                return .publishPart(marker: marker)
            }
            return .startOver
        case .running:
            guard ResumeValidator.ifRange(etag: state.etag, lastModified: state.lastModified) != nil,
                  let size = facts.partSize, size > 0 else { return .startOver }
            let sameBoot = state.bootID != nil && state.bootID == facts.currentBoot
            // A segmented part holds ranges with holes between them: in this boot its prefix and
            // ranges as the state recorded them (`keptRanges`), else only its synced prefix.
            let trusted: Int64
            if state.segments == nil {
                trusted = sameBoot ? size : min(size, state.syncedBytes ?? 0)
            } else if keptRanges(facts) != nil {
                trusted = min(size, sameBoot ? state.bytes : state.syncedBytes ?? 0)
            } else {
                trusted = min(size, state.syncedBytes ?? 0)
            }
            guard trusted > 0 || keptRanges(facts) != nil else { return .startOver }
            return .resume(bytes: trusted, etag: state.etag, lastModified: state.lastModified)
        }
    }

    /// A segmented part's ranges a resume may keep, `[from, done, to]` each: in the boot its
    /// state was written in, as far as each was written (a killed process loses no write); in a
    /// later boot (a power cut), as far as each was synced (`[from, done, to, durable]`), and nil
    /// when none was. Only ranges in order after its prefix and within the part; nil otherwise.
    public static func keptRanges(_ facts: RecoveryFacts) -> [[Int64]]? {
        guard let state = facts.state, state.phase == .running, state.segments != nil,
              let ranges = state.ranges, !ranges.isEmpty, let size = facts.partSize else { return nil }
        let sameBoot = state.bootID != nil && state.bootID == facts.currentBoot
        guard !sameBoot || state.bytes <= size else { return nil }
        var end = ranges[0].first ?? -1
        guard end >= state.bytes else { return nil }
        var kept: [[Int64]] = []
        for r in ranges {
            guard r.count == 3 || r.count == 4, r[0] == end, r[0] <= r[1], r[1] <= r[2] else { return nil }
            let done = sameBoot ? r[1] : (r.count == 4 ? min(max(r[3], r[0]), r[1]) : r[0])
            guard done <= size else { return nil }
            kept.append([r[0], done, r[2]])
            end = r[2]
        }
        if !sameBoot && !kept.contains(where: { $0[1] > $0[0] }) { return nil }
        return kept
    }
}
