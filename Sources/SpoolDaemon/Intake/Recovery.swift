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
        if case .discardUnverified(let file, let expected, let found) = plan {
            logger.error("a published file without its marker does not hash to the digest its journal recorded; removed, the item is fetched again",
                         metadata: ["item": "\(record.id)", "path": "\(store.publishedPath(file))", "expected": "\(expected)",
                                    "actual": "\(found ?? "unreadable")"])
        }
        // The plan carried out by the one carrier the simulator also runs (SpoolStore); here only
        // its outcome is applied to the item's record.
        let ports = RecoveryShellPorts(record: record, store: store, logger: logger, part: facts.part)
        switch RecoveryCarrier.carry(plan, facts: facts.facts, ports: ports) {
        case .queued(let attempts, nil):
            record.recover(.queued, attempts: attempts)
            return .schedule
        case .queued(let attempts, let resume?):
            record.partRecovered(bytes: resume.bytes, etag: resume.etag, lastModified: resume.lastModified, ranges: resume.ranges)
            // The refresh hook's URL, validated again as any URL read from the spool.
            record.noteRefreshedURL(resume.refreshedURL.flatMap { try? RequestURL(validating: $0) })
            record.recover(.queued, attempts: attempts)
            return .schedule
        case .failed(let failure, let attempts):
            record.recover(.failed(ItemFailed(failure)), attempts: attempts)
            return .ended(confirm: nil)
        case .published(let file, let attempts, let markerFacts, let confirm):
            // Kept by the published phase for the group marker (a per-file marker holds them).
            let receipt = record.writesItemMarker ? nil : markerFacts.map(PublishedReceipt.init)
            let marker = record.writesItemMarker ? store.markerPath(ofPublished: file) : ""
            record.recover(.published(file: file, marker: marker, receipt: receipt), attempts: attempts)
            return .ended(confirm: confirm)
        case .publishing(let job, let attempts, let wholePart):
            if let bytes = wholePart { record.partRecoveredWhole(bytes: bytes) }
            record.recover(.publishing(job), attempts: attempts)
            return .publish(job)
        }
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

/// The disk as `RecoveryCarrier`'s ports for one adopted item: its staging files, the final
/// folder, and the part `Recovery` opened (a job carries it on). Failures are logged here, with
/// what the carrier does about them.
private struct RecoveryShellPorts: RecoveryCarrierPorts {
    let record: ItemRecord
    let store: SpoolStore
    let logger: Logger
    let part: StagingFile?

    var hasVoid: Bool { store.voided(record.base) != nil }
    func noteStateFile() { record.noteStateFile() }
    func removeStaging() { store.removeStaging(record.base, voided: false) }

    func truncatePart(to bytes: Int64) throws {
        guard let part else { return }
        do { try part.truncate(to: bytes) } catch {
            logger.warning("could not cut a kept partial back to its synced prefix; starting the item over: \(error)",
                           metadata: ["item": "\(record.id)"])
            throw error
        }
    }

    func makeJob(state: ItemState, marker: ItemMarker, alreadyPublishedAs file: String?) -> PublishJob? {
        // A marker-only job carries a new empty part when the old one is gone.
        guard let part = part ?? (file == nil ? nil : try? store.openPart(record.base, fresh: true)) else { return nil }
        return PublishJob(part: part, state: state, marker: marker, alreadyPublishedAs: file,
                          writesMarker: record.writesItemMarker, replacesExisting: record.replacesExisting)
    }

    func writeVoided(_ state: ItemState, removing file: String) throws {
        do { try store.writeVoided(record.base, state) } catch {
            logger.error("could not record the unverified file as void; it is left in place: \(error)",
                         metadata: ["item": "\(record.id)", "path": "\(store.publishedPath(file))"])
            throw error
        }
    }

    func removePublished(_ file: String) { store.layout.final.remove(file) }
}
