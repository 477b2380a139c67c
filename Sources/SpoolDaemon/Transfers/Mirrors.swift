import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore
import Logging
import SpoolTransfer

/// Mirrors (`mirror:`): an item moves on to its next source when the current one cannot serve it
/// (404, 410, a name that does not resolve, a certificate that does not verify) or its host has
/// been unreachable for longer than `--mirror-after`; once every source has failed, it starts
/// again at the first. The decisions are `ItemLifecycle`'s and `SourceRotation`'s; this carries
/// them out (`Hosts` says when an outage sends items on): the item's current source, the host
/// the scheduler holds it under, and its partial — kept only under a strong ETag, which the
/// resume's `If-Range` then checks at the new source (another version answers 200 and the item
/// starts over: bytes of two versions are never joined).
///
/// Held by `TransferDriver`; the rotation itself is the record's (`ItemRecord.sources`), so this
/// keeps none: it writes the kept bytes' state through `ResumeStates`.
struct MirrorMoves {
    let states: ResumeStates
    let urls: URLPrivacy
    let logger: Logger

    /// The item moves on to its next source. `part`: the part the running phase held, if it just
    /// left it; `requestFile`: where the item's description is read from.
    func moveToNextSource(_ record: ItemRecord, part: StagingFile?, requestFile: RequestFileSlot) {
        let item: RequestItem
        do { item = try record.load(keepingOpenIn: requestFile) } catch { return }
        var rotation = record.sources ?? SourceRotation(count: item.sources.count)
        let from = rotation.current
        _ = rotation.moveOn()
        let source = item.sources[rotation.current]
        record.noteSource(rotation, host: rotation.current == 0 ? nil : source.hostKey)
        record.partMovedToAnotherSource()
        // Kept bytes wait named, with their state, as for a retry (an unnamed part is closed now).
        if record.bytesOnDisk > 0 { states.saveResumeState(record, part: part) }
        logger.info("moving on to another source", metadata: [
            "item": "\(record.id)", "from": "\(from)", "to": "\(rotation.current)", "url": "\(urls.shown(source.string))",
            "keeps-bytes": "\(record.bytesOnDisk)"])
    }
}
