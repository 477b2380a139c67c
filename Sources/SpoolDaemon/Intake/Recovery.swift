import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// What the engine does with an adopted item once its recovery plan has been carried out.
enum RecoveryStep {
    /// Queue it (afresh, or to resume its part).
    case schedule
    /// It has already ended (published or failed): count it as ended. `confirm`: its record,
    /// as published under its final name, when the record it was recovered from does not say so
    /// (phase `ready`, its file found with its marker): the engine journals it, so that a
    /// consumer may take the file and a later crash still finds the item published.
    case ended(confirm: ItemState?)
    /// Hand this job to the publish pipeline.
    case publish(PublishJob)
}

/// Carries out `RecoveryPlanner`'s plans: gathers the facts from the spool, asks the planner,
/// and sets the item up accordingly.
struct Recovery {
    let store: SpoolStore
    let logger: Logger
    /// The names in `staging/` when the requests were adopted (nil: unknown). An item with neither
    /// `B.state` nor `B.part` among them has nothing to recover and is queued afresh without a
    /// system call: a restart on a million clean items must not try two million opens. (Nobody
    /// writes an adopted item's staging files between the listing and its recovery: its worker
    /// is dead and this one has not started it.)
    var stagingNames: Set<String>? = nil

    /// An adopted upload item whose record this request wrote before the restart: it ended
    /// uploaded, and is not sent again (its file moved into `done/` if the move was lost).
    func recoverUpload(_ record: ItemRecord) -> Bool {
        guard record.summary.isUpload, let name = record.details?.upload?.name,
              let found = store.uploadRecord(name, request: record.request.name, inode: record.request.inode,
                                             index: record.index) else { return false }
        record.recover(.published(file: name, marker: store.layout.final.path(of: name + ".uploaded")), attempts: found.attempts)
        do { try store.moveOutgoing(name, failed: false) } catch {
            logger.warning("could not move an uploaded file into done/: \(error)", metadata: ["item": "\(record.id)"])
        }
        logger.info("upload already recorded before the restart; not sent again", metadata: ["item": "\(record.id)"])
        return true
    }

    func recover(_ record: ItemRecord, deadStates: [String: ItemState]) -> RecoveryStep {
        if let names = stagingNames, deadStates[record.base] == nil,
           !names.contains(record.base + ".state"), !names.contains(record.base + ".part") {
            return .schedule
        }
        let facts = gatherFacts(record, deadStates: deadStates)
        let plan = RecoveryPlanner.plan(facts.facts)
        let attempts = facts.facts.state?.attempts ?? 0
        // Staging files the group end removes: a record, or a void a dead adopter left
        // (`B.voided`, which outlives its start-over while the journal line it voids lasts).
        if facts.facts.state != nil || store.voided(record.base) != nil { record.noteStateFile() }
        switch plan {
        case .startOver:
            return startOver(record, attempts: attempts)
        case .resume(let bytes, let etag, let lastModified):
            let ranges = RecoveryPlanner.keptRanges(facts.facts)
            // After a power cut, past the synced prefix: cut off (not a segmented part's ranges).
            if ranges == nil, let part = facts.part, part.size > bytes {
                do { try part.truncate(to: bytes) } catch {
                    logger.warning("could not cut a kept partial back to its synced prefix; starting the item over: \(error)",
                                   metadata: ["item": "\(record.id)"])
                    return startOver(record, attempts: attempts)
                }
            }
            record.partRecovered(bytes: bytes, etag: etag, lastModified: lastModified, ranges: ranges)
            // The refresh hook's URL, validated again as any URL read from the spool.
            record.noteRefreshedURL(facts.facts.state?.refreshedURL.flatMap { try? RequestURL(validating: $0) })
            record.recover(.queued, attempts: attempts)
            return .schedule
        case .failed(let failure):
            record.recover(.failed(ItemFailed(failure)), attempts: attempts)
            return .ended(confirm: nil)
        case .published(let file):
            var receipt: PublishedReceipt? = nil
            if !record.writesItemMarker, var facts = facts.facts.state?.marker {
                facts.name = file
                receipt = PublishedReceipt(facts)
            }
            let marker = record.writesItemMarker ? store.markerPath(ofPublished: file) : ""
            record.recover(.published(file: file, marker: marker, receipt: receipt), attempts: attempts)
            guard var confirmed = facts.facts.state, confirmed.phase != .published else { return .ended(confirm: nil) }
            confirmed.phase = .published
            confirmed.finalName = file
            return .ended(confirm: confirmed)
        case .writeMarker(let file, let marker):
            // The job needs a staging file to carry; the data itself is already in place.
            guard let part = facts.part ?? (try? store.openPart(record.base, fresh: true)),
                  let state = facts.facts.state else {
                record.recover(.queued, attempts: attempts)
                return .schedule
            }
            let job = PublishJob(part: part, state: state, marker: marker, alreadyPublishedAs: file,
                                 writesMarker: record.writesItemMarker, replacesExisting: record.replacesExisting)
            record.recover(.publishing(job), attempts: attempts)
            return .publish(job)
        case .discardUnverified(let file, let expected, let found):
            logger.error("a published file without its marker does not hash to the digest its journal recorded; removed, the item is fetched again",
                         metadata: ["item": "\(record.id)", "path": "\(store.publishedPath(file))", "expected": "\(expected)",
                                    "actual": "\(found ?? "unreadable")"])
            // The journal line naming the file outlives this worker: before the file goes, a synced
            // `B.voided` says that line holds no more, else a later adopter reads "file gone" as
            // consumed. Without it the file stays (it has no marker: no consumer takes it).
            let step = startOver(record, attempts: attempts)
            guard let state = facts.facts.state else { return step }
            do { try store.writeVoided(record.base, state) } catch {
                logger.error("could not record the unverified file as void; it is left in place: \(error)",
                             metadata: ["item": "\(record.id)", "path": "\(store.publishedPath(file))"])
                return step
            }
            store.layout.final.remove(file)
            return step
        case .publishPart(let marker):
            guard let part = facts.part, let state = facts.facts.state else { return startOver(record, attempts: attempts) }
            record.partRecoveredWhole(bytes: part.size)
            let job = PublishJob(part: part, state: state, marker: marker, writesMarker: record.writesItemMarker,
                                 replacesExisting: record.replacesExisting)
            record.recover(.publishing(job), attempts: attempts)
            return .publish(job)
        }
    }

    /// Nothing usable: the item's staging files go and it is queued afresh, its attempts kept.
    /// `B.voided` stays: the dead journal line it voids is read again if this worker dies too.
    private func startOver(_ record: ItemRecord, attempts: Int) -> RecoveryStep {
        store.removeStaging(record.base, voided: false)
        record.recover(.queued, attempts: attempts)
        return .schedule
    }

    /// The facts, gathered by `RecoveryFacts.gather` from the disk (the simulator gathers them by
    /// the same code from its simulated spool), and the part opened here, which a plan may carry on.
    private func gatherFacts(_ record: ItemRecord, deadStates: [String: ItemState]) -> (facts: RecoveryFacts, part: StagingFile?) {
        var part: StagingFile? = nil
        do { part = try store.openPartIfPresent(record.base) } catch {
            logger.warning("could not open a kept partial; starting the item over: \(error)", metadata: ["item": "\(record.id)"])
        }
        let facts = RecoveryFacts.gather(request: record.request.name, index: record.index, base: record.base,
                                         journaled: deadStates[record.base], part: part.map { ($0.size, $0.inode) },
                                         markersPerItem: record.writesItemMarker, currentBoot: BootID.current, spool: store)
        return (facts, part)
    }
}
