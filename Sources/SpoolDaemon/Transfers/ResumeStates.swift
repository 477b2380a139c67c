import Foundation
import Logging
import SpoolCore
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// The `B.state` files of items whose transfer runs or stopped: what a restart resumes from.
/// Written when a large body begins, at checkpoints (`--sync-every`), at most every 250 ms for a
/// segmented body, and when a transfer stops with bytes worth keeping; each says how much of the
/// part is synced, so that a resume after a power cut never builds on bytes the disk lost.
///
/// Its own type, held by `TransferDriver`: the driver, a move to another source
/// (`MirrorMoves`), the refresh hook's answer (`URLRefresh`) and uploads
/// (`UploadTransfers`) all write states, and which ranges a segmented item's state records is
/// bookkeeping of the writer's (`segmented`).
final class ResumeStates {
    private let session: TransferSession
    private let store: SpoolStore
    private let urls: URLPrivacy
    private let logger: Logger
    /// Items whose body is fetched in segments now, with their ranges (`ItemState.segments`).
    private var segmented: [Int: Int] = [:]
    private var segmentStateWritten: [Int: Date] = [:]

    init(session: TransferSession, store: SpoolStore, urls: URLPrivacy, logger: Logger) {
        self.session = session
        self.store = store
        self.urls = urls
        self.logger = logger
    }

    /// A start fetches only the missing parts of `ranges` kept ranges: every state written from
    /// now on says so (its part has ranges past the prefix).
    func fetchesKeptRanges(_ key: Int, ranges: Int) { segmented[key] = ranges }

    /// The item's transfer left the session: it is segmented no more.
    func transferEnded(_ key: Int) {
        segmented.removeValue(forKey: key)
        segmentStateWritten.removeValue(forKey: key)
    }

    /// A `B.state` in phase running for a transfer that runs: `bytes` of its part, `synced` of
    /// them synced. When it is written (a large body's start, a checkpoint) is `TransferBook`'s
    /// decision.
    func writeRunning(_ record: ItemRecord, _ part: StagingFile, bytes: Int64, synced: Int64) {
        write(record, runningState(record, part, bytes: bytes, synced: synced))
    }

    /// A `B.state` in phase running: the part's validators and how much of it is synced, in this boot.
    /// `keptSynced`: the item is not running and its part was just synced: its kept ranges (a
    /// segmented transfer that stopped) are durable as far as they reach.
    private func runningState(_ record: ItemRecord, _ part: StagingFile, bytes: Int64, synced: Int64?,
                              keptSynced: Bool = false) -> ItemState {
        var segments = segmented[record.key]
        var ranges = segments == nil ? nil : session.segmentExtents(of: record.key)?.ranges
        if segments == nil, let kept = record.keptRanges, !kept.isEmpty {
            segments = kept.count
            ranges = kept.map { r in r.count >= 3 ? [r[0], r[1], r[2], keptSynced ? r[1] : r[0]] : r }
        }
        return ItemState(request: record.request.name, index: record.index, url: urls.shown(record.loaded?.url.string ?? record.url),
                         phase: .running, inode: part.inode, etag: record.etag, lastModified: record.lastModified,
                         bytes: bytes, attempts: record.attempts, startedAt: record.startedAt.map(RFC3339.format),
                         syncedBytes: synced, bootID: BootID.current, refreshedURL: record.refreshedURL?.string,
                         segments: segments, ranges: ranges)
    }

    /// A segmented item's state with its ranges as far as they are in the file now, at most every
    /// 250 ms: what a restart in this boot builds on (`ItemState.ranges`).
    func saveSegmentState(_ record: ItemRecord, now: Date) {
        guard segmented[record.key] != nil, let part = record.part, record.hasStateFile,
              now.timeIntervalSince(segmentStateWritten[record.key] ?? .distantPast) >= 0.25,
              let extents = session.segmentExtents(of: record.key) else { return }
        segmentStateWritten[record.key] = now
        write(record, runningState(record, part, bytes: extents.prefix, synced: session.durablePrefix(of: record.key)))
    }

    /// `record`'s body is about to be fetched in up to `ranges` ranges. Its state says so first,
    /// before any range is written: a restart then trusts only the synced in-order prefix. False
    /// when that state cannot be written (the body then stays one stream).
    func markSegmented(_ record: ItemRecord, ranges: Int) -> Bool {
        guard let part = record.part else { return false }
        segmented[record.key] = ranges
        guard record.hasStateFile || part.isNamed else { return true }   // no state: a restart starts over
        let durable = session.durablePrefix(of: record.key)
        do {
            try store.writeState(record.base, runningState(record, part, bytes: durable, synced: durable))
            record.noteStateFile()
            return true
        } catch {
            segmented.removeValue(forKey: record.key)
            logger.warning("could not write the item's state; fetched as one stream: \(error)", metadata: ["item": "\(record.id)"])
            return false
        }
    }

    /// Writes `B.state` so that a restart resumes the partial (only when it can be resumed),
    /// after syncing the part: a transfer stopped (a failure to retry, an outage, a pause, a
    /// stop) may wait for hours, and a power cut meanwhile must not cost its bytes.
    /// `part`: the part the running phase held (the item has left it by now).
    func saveResumeState(_ record: ItemRecord, part: StagingFile?) {
        guard record.bytesOnDisk > 0 || record.keptRanges != nil, record.validator != nil, let part,
              nameForResume(record, part) else { return }
        var synced: Int64? = nil
        do { synced = min(try part.syncedLength(), record.bytesOnDisk) } catch {
            // Not fatal: a restart in this boot still resumes; after a power cut it starts over.
            logger.warning("could not sync the partial: \(error)", metadata: ["item": "\(record.id)"])
        }
        write(record, runningState(record, part, bytes: record.bytesOnDisk, synced: synced, keptSynced: synced != nil))
    }

    /// Gives an unnamed part its staging name, so that a restart finds it (a large body's part
    /// gets it when the body begins, resumable or not: a crash must not lose it unseen, and
    /// `ls staging/` shows it); false (logged) when that fails: the item then starts over after a restart instead of resuming.
    func nameForResume(_ record: ItemRecord, _ part: StagingFile) -> Bool {
        do {
            try store.name(part)
            return true
        } catch {
            logger.warning("could not name the partial in staging: \(error)", metadata: ["item": "\(record.id)"])
            return false
        }
    }

    func write(_ record: ItemRecord, _ state: ItemState) {
        do {
            try store.writeState(record.base, state)
            record.noteStateFile()
        } catch {
            // Not fatal: without it a restart starts the item over instead of resuming it.
            logger.warning("could not write the item's resume state: \(error)", metadata: ["item": "\(record.id)"])
        }
    }
}
