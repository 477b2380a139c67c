import Foundation
import SpoolCore
import SpoolStore

/// The simulated spool's files, as the daemon's spool holds them: per item `staging/B.state`
/// (running, written by `saveResumeState`; failed, by a failure) and `staging/B.part` (its size,
/// inode and, once verified, SHA-256), the publish batches' journals (by writer), and the final
/// folder's data files and markers. Written by the simulated transfer, publish, failure and
/// group-end steps; read after a kill by the daemon's own `RecoveryFacts.gather` and
/// `RecoveryPlanner`, carried out by its `RecoveryCarrier` (`SimDaemon.recoverAdopted`), so no recovery rule is written here.
final class SimSpool: RecoverySpool {
    struct Part { var size: Int64; let inode: UInt64; var sha256: String? }
    /// A batch journal: its writer (a worker process, `SimDaemon.incarnation`) and its entries by base.
    struct Journal { let writer: Int; var entries: [String: ItemState] }
    struct FinalFile { let bytes: Int64; let sha256: String }

    /// The boot every simulated state is written and read in (the simulation has no power cuts).
    static let boot = "sim-boot"

    var states: [String: ItemState] = [:]
    /// A failed item's record as the machine made it: what the daemon's bridge reads back from
    /// the state file's `failure` (`ItemFailed(ItemFailure)`), kept whole for the trace's sake.
    var failures: [String: ItemFailed] = [:]
    var parts: [String: Part] = [:]
    var journals: [String: Journal] = [:]
    var finals: [String: FinalFile] = [:]
    /// Markers in the final folder (`NAME.done`), each with the digest it vouches for.
    var markers: [String: String] = [:]
    /// `staging/B.voided`: the record whose published file a recovery removed as unverified.
    var voidedRecords: [String: ItemState] = [:]
    /// Names the operator paths' spool placed each item's file under (`Simulation.renamedBeforeCrash`).
    var placedNames: [Int: String] = [:]
    private var inodes: UInt64 = 100
    private var journalCount = 0

    func base(_ spec: Simulation.ItemSpec) -> String { SpoolStore.stagingBase(spec.request, index: spec.index) }

    // MARK: Writes (the simulated steps)

    /// A transfer starts: the kept part is resumed, else a new one is made (a new inode).
    func partOpened(_ base: String) {
        if parts[base] == nil { inodes += 1; parts[base] = Part(size: 0, inode: inodes) }
    }

    /// An attempt ended with bytes kept: its part holds some, and its resume state says so.
    func saveResumeState(_ spec: Simulation.ItemSpec, attempts: Int) {
        let base = base(spec)
        guard var part = parts[base] else { return }
        part.size = max(part.size, spec.bytes / 2 + 1)
        part.sha256 = nil
        parts[base] = part
        states[base] = ItemState(request: spec.request, index: spec.index, url: "http://\(spec.host)/\(spec.id)",
                                 phase: .running, inode: part.inode, etag: "\"e\(spec.id)\"", bytes: part.size,
                                 attempts: attempts, syncedBytes: part.size, bootID: Self.boot)
    }

    /// The body is complete and verified (`publish`): the whole part, of that digest.
    func verified(_ spec: Simulation.ItemSpec, sha256: String) {
        let base = base(spec)
        partOpened(base)
        parts[base]!.size = spec.bytes
        parts[base]!.sha256 = sha256
    }

    func discardPart(_ base: String) { parts.removeValue(forKey: base) }

    /// A failure for good: the part goes, the state says failed.
    func failed(_ spec: Simulation.ItemSpec, _ failed: ItemFailed) {
        let base = base(spec)
        parts.removeValue(forKey: base)
        failures[base] = failed
        states[base] = ItemState(request: spec.request, index: spec.index, url: "http://\(spec.host)/\(spec.id)",
                                 phase: .failed, attempts: failed.attempts,
                                 failure: ItemFailure(index: spec.index, url: "http://\(spec.host)/\(spec.id)", name: "f\(spec.id)",
                                                      code: failed.code, message: failed.message, attempts: failed.attempts))
    }

    /// A batch's journal, written before any of its renames: an entry (phase ready) per job whose
    /// part is verified, with the part's inode and the marker's facts.
    /// A marker-only job (`markerOnly`: the record a recovery found its file by) is journaled
    /// with that record, as the daemon's publisher journals it.
    func writeJournal(writer: Int, items: [(spec: Simulation.ItemSpec, attempts: Int, markerOnly: ItemState?)]) -> String {
        journalCount += 1
        let name = "batch-\(writer)-\(journalCount).journal"
        var entries: [String: ItemState] = [:]
        for (spec, attempts, markerOnly) in items {
            let base = base(spec)
            if let markerOnly {
                entries[base] = markerOnly
                continue
            }
            guard let part = parts[base], let sha = part.sha256 else { continue }
            let marker = ItemMarker(request: spec.request, group: spec.request, index: spec.index,
                                    url: "http://\(spec.host)/\(spec.id)", finalURL: nil, name: "f\(spec.id)", bytes: part.size,
                                    sha256: sha, httpStatus: 200, etag: nil, lastModified: nil, contentType: nil,
                                    startedAt: "t", finishedAt: "t", attempts: attempts)
            entries[base] = ItemState(request: spec.request, index: spec.index, url: marker.url, phase: .ready,
                                      inode: part.inode, bytes: part.size, attempts: attempts, marker: marker)
        }
        journals[name] = Journal(writer: writer, entries: entries)
        return name
    }

    /// The batch published the item: its part renamed into the final folder (inode and all), its
    /// marker written, and its journal's line naming the file.
    func published(_ spec: Simulation.ItemSpec, journal: String) {
        let base = base(spec)
        let file = "f\(spec.id)"
        if let part = parts.removeValue(forKey: base) {
            finals[file] = FinalFile(bytes: part.size, sha256: part.sha256 ?? "")
        }
        markers[file + ".done"] = finals[file]?.sha256
        journals[journal]?.entries[base]?.phase = .published
        journals[journal]?.entries[base]?.finalName = file
    }

    /// A batch renamed the item's part into the final folder, and died before its marker;
    /// `overwritten`: another program then wrote into the file (its bytes are not the journaled digest).
    func renamed(_ spec: Simulation.ItemSpec, placed: String?, overwritten: Bool) {
        guard let part = parts.removeValue(forKey: base(spec)) else { return }
        finals["f\(spec.id)"] = FinalFile(bytes: part.size, sha256: overwritten ? "overwritten-\(spec.id)" : part.sha256 ?? "")
        placedNames[spec.id] = placed
    }

    /// The journal's line naming each renamed item's final file (written after all renames).
    func journalNames(_ journal: String, _ specs: [Simulation.ItemSpec]) {
        for spec in specs where finals["f\(spec.id)"] != nil {
            journals[journal]?.entries[base(spec)]?.phase = .published
            journals[journal]?.entries[base(spec)]?.finalName = "f\(spec.id)"
        }
    }

    /// A consumer takes every file whose marker is there, with its marker (a file without one is
    /// not yet published, and stays).
    func consumerTakes() {
        for (marker, _) in markers.sorted(by: { $0.key < $1.key }) {
            let file = String(marker.dropLast(5))
            guard finals.removeValue(forKey: file) != nil else { continue }
            markers.removeValue(forKey: marker)
        }
    }

    /// The contract's word on markers: a marker's digest is that of the bytes it stands beside.
    func checkMarkers() -> String? {
        for (marker, sha) in markers.sorted(by: { $0.key < $1.key }) {
            if let file = finals[String(marker.dropLast(5))], file.sha256 != sha {
                return "marker \(marker) vouches for SHA-256 \(sha), its file's bytes are \(file.sha256)"
            }
        }
        return nil
    }

    /// A marker-only job's batch: the marker written for `file` (false: the file is not there) and
    /// the journal's line naming it.
    func markerWritten(_ spec: Simulation.ItemSpec, file: String, journal: String) -> Bool {
        let base = base(spec)
        if let sha = journals[journal]?.entries[base]?.marker?.sha256 { markers[file + ".done"] = sha }
        journals[journal]?.entries[base]?.phase = .published
        journals[journal]?.entries[base]?.finalName = file
        return finals[file] != nil
    }

    /// The group ended: the request's items' staging files go.
    /// `voided: false` (an adopted item started over): `B.voided` stays, as the daemon's `Recovery` keeps it.
    func removeStaging(_ base: String, voided: Bool = true) {
        states.removeValue(forKey: base)
        parts.removeValue(forKey: base)
        failures.removeValue(forKey: base)
        if voided { voidedRecords.removeValue(forKey: base) }
    }

    /// Which worker process holds each writer's folder in `active/` (absent: the writer itself):
    /// an adopter takes the dead worker's folder over, with the folders that one held.
    var folderHolder: [Int: Int] = [:]

    /// Worker `dead` was killed and `adopter` took its requests: its folder and those it held pass over.
    func foldersTaken(from dead: Int, by adopter: Int) {
        for (writer, holder) in folderHolder where holder == dead { folderHolder[writer] = adopter }
        folderHolder[dead] = adopter
    }

    /// What the journals `reader` may read as a dead worker's say, as `SpoolStore.readJournals` reads
    /// them (of two entries for one item, `preferringPublished` picks), and their names: those
    /// whose writer's folder is held by no live worker, or by the reader; never the reader's own (`journalIsLive`).
    func deadJournals(reader: Int, isLive: (Int) -> Bool) -> (states: [String: ItemState], files: [String]) {
        var states: [String: ItemState] = [:]
        var files: [String] = []
        for name in journals.keys.sorted() {
            let writer = journals[name]!.writer, holder = folderHolder[writer] ?? writer
            guard writer != reader, !isLive(holder) || holder == reader else { continue }
            files.append(name)
            for (base, state) in journals[name]!.entries.sorted(by: { $0.key < $1.key }) {
                states[base] = states[base].map { preferringPublished(state, $0) } ?? state
            }
        }
        return (states, files)
    }

    // MARK: RecoverySpool (what the daemon's recovery asks)

    func state(_ base: String) -> ItemState? { states[base] }
    func partSHA256(_ base: String) -> String? { parts[base]?.sha256 }
    /// The simulation names each item's file uniquely (`fN`): no `-1` suffixes, and no inode reuse.
    func findPublished(name: String, inode: UInt64) -> String? { finals[name] == nil ? nil : name }
    func publishedSize(_ file: String) -> Int64? { finals[file]?.bytes }
    func hasMarker(ofPublished file: String) -> Bool { markers[file + ".done"] != nil }
    func sha256(ofPublished file: String) -> String? { finals[file]?.sha256 }
    func voided(_ base: String) -> ItemState? { voidedRecords[base] }
}

/// The simulated staging folder as the journal keeper's port.
final class SimJournalPorts: JournalPorts {
    unowned let world: Simulation
    init(world: Simulation) { self.world = world }
    func removeJournals(_ names: [String]) {
        for name in names { world.spool.journals.removeValue(forKey: name) }
        world.log("journals removed: \(names.joined(separator: " "))")
    }
}

/// A worker's memory of its journals: the daemon's own `JournalKeeper`, each claimed request's
/// journal names (as the daemon's `RequestRecord.journals`), and which requests it adopted.
final class SimLedger {
    let keeper: JournalKeeper<ItemState, SimJournalPorts>
    var requestJournals: [String: [String]] = [:]
    var adopted: Set<String> = []
    /// Marker-only jobs (`SimJob.alreadyPublishedAs`): the file and the record their batch
    /// journals (the one a recovery found the file by, or the failed batch's line naming it).
    var markerOnly: [Int: (file: String, state: ItemState)] = [:]
    /// Items a recovery noted as having staging files (a record or a void): their group end
    /// removes `B.voided` too, as the daemon's `GroupEnds` removes the noted items' files.
    var stagingNoted: Set<Int> = []
    init(world: Simulation) { keeper = JournalKeeper(ports: SimJournalPorts(world: world)) }
}

extension SimDaemon {
    /// Before taking over `count` requests of dead workers: their journals are read, as
    /// `Intake.adoptDeadWorkers` reads them, and kept until the adopted requests end.
    func learnDeadJournals(adopting count: Int) {
        let dead = world.spool.deadJournals(reader: incarnation, isLive: world.isLive)
        ledger.keeper.learn(states: dead.states, files: dead.files, preferring: world.spool.preferringPublished)
        ledger.keeper.expectAdoptions(count)
        ledger.keeper.forgetDeadIfSpent()
    }

    /// An adopted item, recovered by the daemon's planner from the facts the daemon's gathering
    /// reads from the simulated spool; the plan carried out on the spool's files as `Recovery` does,
    /// with the item's first step as `Intake.accept` makes it from `Recovery`'s.
    func recoverAdopted(_ id: Int) -> (Machine, FirstStep, confirm: ItemState?) {
        let spec = world.spec(id)
        let spool = world.spool
        let base = spool.base(spec)
        let part = spool.parts[base]
        let facts = RecoveryFacts.gather(request: spec.request, index: spec.index, base: base,
                                         journaled: ledger.keeper.deadStates[base], part: part.map { ($0.size, $0.inode) },
                                         markersPerItem: true, currentBoot: SimSpool.boot, spool: spool)
        let plan = RecoveryPlanner.plan(facts)
        world.log("item \(id): recovered as \(planName(plan))")
        // The world's truth: a file no marker vouches for, of other bytes, was never a publication
        // (whether the recovery can remove it or must leave it in place).
        if case .discardUnverified = plan { world.unpublished(id, placed: nil) }
        // Carried out by the daemon's own carrier; here only its outcome becomes the machine.
        switch RecoveryCarrier.carry(plan, facts: facts, ports: SimRecoveryPorts(daemon: self, id: id, base: base)) {
        case .queued(let attempts, _):
            return (Machine(recovered: .queued, firstQueued: world.now, attempts: attempts), .submit, nil)
        case .failed(_, let attempts):
            guard let failed = spool.failures[base] else {
                violation = "item \(id) recovered as failed with no failure recorded"
                return (Machine(recovered: .queued, firstQueued: world.now, attempts: attempts), .submit, nil)
            }
            return (Machine(recovered: .failed(failed), firstQueued: world.now, attempts: attempts), .ended, nil)
        case .published(let file, let attempts, _, let confirm):
            return (Machine(recovered: .published(file: file, marker: file + ".done"), firstQueued: world.now, attempts: attempts), .ended, confirm)
        case .publishing(let job, let attempts, _):
            return (Machine(recovered: .publishing(job), firstQueued: world.now, attempts: attempts), .publish, nil)
        }
    }

    private func planName(_ plan: RecoveryPlan) -> String {
        switch plan {
        case .startOver: return "startOver"
        case .resume(let bytes, _, _): return "resume(\(bytes))"
        case .failed(let f): return "failed(\(f.code))"
        case .published(let file): return "published(\(file))"
        case .writeMarker(let file, _): return "writeMarker(\(file))"
        case .publishPart: return "publishPart"
        case .discardUnverified(let file, _, _): return "discardUnverified(\(file))"
        }
    }

    /// While faults are on, now and then (drawn aside from the seed's main stream) the worker
    /// dies in the middle of a batch: after its journal, with a prefix of its jobs' data renamed
    /// into the final folder (now and then overwritten there by another program), before any
    /// marker; the journal's line naming the files written when all were renamed, or not. Its
    /// claims pass to an adopter, which recovers them from those files. True when it died.
    func crashesMidBatch(_ jobs: [SimJob], journal: String) -> Bool {
        guard world.faultsOn else { return false }
        var side = world.sideRandom("batch crash \(journal)")
        guard side.chance(0.04) else { return false }
        let renamed = side.below(jobs.count + 1)
        let named = renamed == jobs.count && side.chance(0.5)
        var specs: [Simulation.ItemSpec] = []
        // A marker-only job's data is in place already: it has nothing to rename.
        for job in jobs.prefix(renamed) where machines[job.item]?.phase == .publishing && job.alreadyPublishedAs == nil {
            let placed = world.renamedBeforeCrash(job.item)
            // Overwritten whether or not a journal line names the file: a recovery that removes a
            // named one as unverified voids the line first (`B.voided`) for later adopters.
            world.spool.renamed(world.spec(job.item), placed: placed, overwritten: side.chance(0.3))
            specs.append(world.spec(job.item))
        }
        if named { world.spool.journalNames(journal, specs) }
        world.log("\(name) dies in batch \(journal) after \(renamed) of \(jobs.count) renames\(named ? ", names journaled" : "")")
        let me = world.workersForChecks.firstIndex { $0 === self }!
        world.killWorker(me, adopter: side.below(world.workersForChecks.count))
        return true
    }

    /// A batch came back: its journal (written before its renames) is attached to the open
    /// requests of its jobs, and goes at once when none is open, by the daemon's `JournalKeeper`.
    func attachJournal(_ journal: String, jobs: [SimJob]) {
        for job in jobs {
            let request = world.spec(job.item).request
            guard groups[request] != nil else { continue }
            ledger.keeper.attach(journal, to: &ledger.requestJournals[request, default: []])
        }
        ledger.keeper.batchAttached([journal])
    }

    /// The request's group ended and it is forgotten: its journals released.
    func releaseJournals(_ name: String) {
        var journals = ledger.requestJournals.removeValue(forKey: name) ?? []
        ledger.keeper.release(&journals, adopted: ledger.adopted.remove(name) != nil)
    }
}
