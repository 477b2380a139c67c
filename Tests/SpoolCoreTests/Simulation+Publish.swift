import Foundation
import SpoolCore

// A publish batch's result for each of its jobs: what the publisher gets done on the simulated
// disks (a marker-only job's marker; the data renamed, its marker written; a full final folder,
// an EIO, a part another program removed from staging, a marker that fails after the data's
// rename), turned into the item's event by the daemon's own `PublishEnding` over a worker's
// simulated ports (`SimPublishPorts`). Here is none of the mapping's rules, only the world's
// truth the invariants check its events against.

extension SimDaemon {
    func batchReports(_ job: SimJob, journal: String) {
        let id = job.item
        // The publisher publishes every job its batch holds (the I/O queue runs the batch; only
        // its result goes to the item): a job of an item that ended meanwhile would publish a
        // file for an item already filed as failed. A cancel while a batch holds the job leaves
        // the item publishing, for the batch's result to decide.
        guard machines[id]?.phase == .publishing else {
            violation = "item \(id) ended (\(machines[id]?.phase.label ?? "forgotten")) while a batch held its job: the batch publishes it anyway"
            return
        }
        let spec = world.spec(id)
        let base = world.spool.base(spec)
        var ingest = false
        let outcome: PublishOutcome
        if let file = job.alreadyPublishedAs {
            // A marker-only job (a recovery's, or the retry of one whose marker failed): the data
            // is in place; its marker written, journaled.
            ledger.markerOnly.removeValue(forKey: id)
            if world.spool.markerWritten(spec, file: file, journal: journal) == false {
                violation = "item \(id): a marker is written for \(file), which is not there"
            }
            outcome = .published(file: file, marker: file + ".done")
        } else if partGoesMissing(id, base: base, journal: journal) {
            outcome = .failed(finalName: nil, permanent: false, diskFull: false, message: "rename staging/\(base).part: ENOENT")
        } else {
            let before = world.operatorSpool.finalNames
            if let fault = world.publish(id) {
                outcome = .failed(finalName: nil, permanent: false, diskFull: fault.diskFull, message: fault.message)
            } else if let file = markerFails(id, journal: journal, placed: world.operatorSpool.finalNames.subtracting(before).first) {
                outcome = .failed(finalName: file, permanent: false, diskFull: false, message: "rename \(file).done.tmp: EIO")
            } else {
                world.spool.published(spec, journal: journal)
                outcome = .published(file: "f\(id)", marker: "f\(id).done")
                ingest = true
            }
        }
        let ports = SimPublishPorts(daemon: self)
        let event: ItemEvent<SimPart, SimJob, SimReceipt> = PublishEnding.event(outcome, job: job, of: id, ports: ports)
        // Before the machine decides: a failure for good removes the part.
        let partInStaging = world.spool.parts[base] != nil
        send(event, to: id)
        if ingest { storeIngest(id) }
        checkEnding(id, base: base, outcome, event, partInStaging: partInStaging, couldNotName: ports.couldNotName)
    }

    /// While faults are on, now and then (drawn aside) another program removes a named part from
    /// staging before the batch renames it (an unnamed one has no name to be removed by).
    private func partGoesMissing(_ id: Int, base: String, journal: String) -> Bool {
        guard world.faultsOn, parts[id]?.named ?? true, world.spool.parts[base] != nil,
              world.sideChance(0.03, "part gone \(journal) \(id)") else { return false }
        world.spool.parts.removeValue(forKey: base)
        world.log("item \(id): another program removed staging/\(base).part")
        return true
    }

    /// While faults are on, now and then (drawn aside) the batch renames the data into the final
    /// folder and then fails to put its marker in place: the data stays there (`placed` among
    /// the final names), the journal names it, and its retry must write only the marker, from
    /// the journaled record. Returns the data's final name when it failed so.
    private func markerFails(_ id: Int, journal: String, placed: String?) -> String? {
        guard world.faultsOn, world.sideChance(0.04, "marker fails \(journal) \(id)") else { return nil }
        let spec = world.spec(id), file = "f\(id)"
        world.spool.renamed(spec, placed: placed, overwritten: false)
        world.spool.journalNames(journal, [spec])
        if let state = world.spool.journals[journal]?.entries[world.spool.base(spec)] { ledger.markerOnly[id] = (file, state) }
        world.log("item \(id): its data went into the final folder as \(file); its marker failed")
        return file
    }

    /// The event checked against the world's truth, and the machine against the event.
    private func checkEnding(_ id: Int, base: String, _ outcome: PublishOutcome, _ event: ItemEvent<SimPart, SimJob, SimReceipt>,
                             partInStaging: Bool, couldNotName: Bool) {
        if cancelledInBatch.contains(id), !(machines[id]?.phase.hasEnded ?? true) {
            violation = "item \(id) was cancelled while a batch held its job, and did not end when the batch reported"
        }
        switch event {
        case .publishSucceeded(_, _, let receipt):
            // What a `markers: group` marker lists of the file is its published phase's to keep.
            if let machine = machines[id], case .published = machine.state, machine.state.receipt != receipt {
                violation = "item \(id) is published without the receipt its batch's result carried"
            }
        case .publishFailed(let fault, let returned):
            if fault.partGone, partInStaging {
                violation = "item \(id): its publish failed as 'part gone', yet its part (\(base)) still holds its bytes in staging"
            }
            if case .failed(let file?, _, _, _) = outcome, returned?.alreadyPublishedAs != file {
                violation = "item \(id): its data went into the final folder as \(file) before its publish failed, "
                    + "and its job came back without that: its next try would publish it again"
            }
            // Its data still in staging (the world's word, not the job's).
            let phase = machines[id]?.phase
            if case .failed(nil, _, _, _) = outcome, phase == .publishing || phase == .waitingToPublish,
               parts[id]?.named == false, !couldNotName {
                violation = "item \(id) waits to publish again with its part unnamed in staging: a restart would download it again"
            }
        default:
            violation = "item \(id): a batch's result became \(event)"
        }
    }
}

/// A simulated worker's ports for the daemon's `PublishEnding`: an item's part is its transfer's
/// (`SimTransferItem`, named or not; an adopter's parts were found by their names) on the
/// simulated spool; naming it fails now and then while faults are on (drawn aside); the final
/// folder's filesystem says whether a body can ever fit there, by the core's `SpaceRules`.
final class SimPublishPorts: PublishEndingPorts {
    typealias Item = Int
    typealias Job = SimJob
    typealias Receipt = SimReceipt

    unowned let daemon: SimDaemon
    init(daemon: SimDaemon) { self.daemon = daemon }
    private var world: Simulation { daemon.world }
    /// Naming the part failed in this ending (the item then waits with its part unnamed).
    private(set) var couldNotName = false

    func partIsNamed(_ job: SimJob) -> Bool { daemon.parts[job.item]?.named ?? true }

    /// Found by its name in staging: an unnamed part has none.
    func partExists(_ id: Int, _ job: SimJob) -> Bool {
        (daemon.parts[id]?.named ?? true) && world.spool.parts[world.spool.base(world.spec(id))] != nil
    }

    func namePart(_ id: Int, _ job: SimJob) throws {
        guard let part = daemon.parts[id], !part.named else { return }
        if world.faultsOn && world.sideChance(0.05, "name part \(id) \(world.trace.count)") {
            world.log("item \(id): its part could not be named in staging (EIO)")
            throw SimNamingFault()
        }
        part.named = true
    }

    func handedBack(_ job: SimJob, alreadyPublishedAs file: String?) -> SimJob { SimJob(item: job.item, alreadyPublishedAs: file) }
    func neverFits(_ job: SimJob) -> String? { SpaceRules.never(bytes: world.spec(job.item).bytes, on: world.finalSpace) }
    func receipt(_ id: Int, _ job: SimJob, file: String) -> SimReceipt? { SimReceipt(item: id) }
    func namingFailed(_ id: Int, _ error: any Error) { couldNotName = true }
    func publishFailed(_ id: Int, message: String) {}
}

struct SimNamingFault: Error {}
