import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

extension SimDaemon {
    /// What the daemon's parser makes of request `name`'s text as its producer (or the retry)
    /// wrote it: `RequestParser.index` within the daemon's default `ParseLimits`, as
    /// `Intake.parse` indexes a claimed file. The items the worker makes are the index's, in file
    /// order (each the world's item of that index); nil when the text is refused, and then no
    /// item and no group may be made (the daemon files it in `rejected/`).
    func parsedItems(_ name: String) -> [Int]? {
        let request = world.request(name)
        guard let text = world.operatorSpool.texts[name] else {
            violation = "request \(name) was claimed with no text written"
            return nil
        }
        let index: RequestIndex
        do { index = try RequestParser.index(fileName: name, bytes: Array(text.utf8), limits: ParseLimits()) } catch {
            world.log("\(name) rejected by the parser: \(error.description)")
            world.requestRejected(name)
            return nil
        }
        let ids = index.items.map { Int($0.index) < request.items.count ? request.items[Int($0.index)] : -1 }
        guard ids == request.items else {
            violation = "request \(name): the parser's items \(index.items.map(\.index)) are not the \(request.items.count) written"
            return nil
        }
        return ids
    }
}

extension Simulation {
    /// Now and then (drawn aside) a producer drops a malformed request file beside the good
    /// ones: it holds no item the world knows, and must end in `rejected/` with no item made.
    func dropMalformedRequest(after name: String, worker w: Int) -> Bool {
        var side = sideRandom("malformed \(name)")
        guard side.chance(0.03) else { return false }
        let bad = name + "-bad"
        let texts = ["url: http://h1/x\nretries: many\n", "name: nothing\n", "url: ftp://h1/x\n"]
        operatorSpool.texts[bad] = texts[side.below(texts.count)]
        addMalformed(bad)
        log("request \(bad) dropped: malformed, claimed by \(workersForChecks[w].name)")
        workersForChecks[w].claim(bad)
        if workersForChecks[w].groups[bad] != nil || !request(bad).items.isEmpty {
            workersForChecks[w].violation = "malformed request \(bad) was taken in"
        }
        if requestFolder(bad) != .rejected {
            workersForChecks[w].violation = "malformed request \(bad) did not end in rejected/"
        }
        return true
    }
}

extension Simulation {
    /// Now and then (drawn aside, while faults are on) one of a dying worker's requests no longer
    /// parses for its adopter (say a reload lowered `max-items` since its claim): the adopter
    /// files it in `rejected/` and its ledger drops the adoption, so the dead worker's journals
    /// still go once the other adopted requests end (checked when everything has ended).
    func refuseOnAdoption(_ adopted: [String]) {
        guard let name = drawnAside(adopted, "refused on adoption", chance: 0.04) else { return }
        refusedOnAdoption.insert(name)
        log("request \(name) will not parse for its adopter")
    }
}

/// The simulated spool as the daemon's `RecoveryCarrier` reaches it for one adopted item: no
/// rule of recovery here, only what each port does to the simulated files.
struct SimRecoveryPorts: RecoveryCarrierPorts {
    unowned let daemon: SimDaemon
    let id: Int
    let base: String
    private var spool: SimSpool { daemon.world.spool }

    var hasVoid: Bool { spool.voidedRecords[base] != nil }
    /// Its group end removes its staging files, its void included (`SimGroupEndPorts.writeEnd`).
    func noteStateFile() { daemon.ledger.stagingNoted.insert(id) }
    func removeStaging() { spool.removeStaging(base, voided: false) }
    func truncatePart(to bytes: Int64) throws { spool.parts[base]?.size = bytes }
    /// A marker-only job is journaled with the record its file was found by.
    func makeJob(state: ItemState, marker: ItemMarker, alreadyPublishedAs file: String?) -> SimJob? {
        if let file { daemon.ledger.markerOnly[id] = (file, state) }
        return SimJob(item: id, alreadyPublishedAs: file)
    }
    /// Now and then (drawn aside) the void cannot be written (EIO): the file must stay.
    func writeVoided(_ state: ItemState, removing file: String) throws {
        let world = daemon.world
        if world.faultsOn && world.sideChance(0.3, "void \(base) \(file) \(daemon.incarnation)") {
            world.log("item \(id): its void could not be written (EIO); \(file) is left in place")
            throw SimVoidFault()
        }
        spool.voidedRecords[base] = state
    }
    /// The file and the name it held go (the world already counts it as no publication).
    func removePublished(_ file: String) {
        spool.finals.removeValue(forKey: file)
        if let placed = spool.placedNames.removeValue(forKey: id) { daemon.world.operatorSpool.finalNames.remove(placed) }
    }
}

struct SimVoidFault: Error {}

/// A worker as the ports of an accepted request's start (`RequestStart`, the daemon's own).
struct SimRequestStart: RequestStartPorts {
    unowned let daemon: SimDaemon
    let name: String
    let deadline: Date?
    func submit(_ id: Int) { daemon.send(.submitted, to: id) }
    func ended(_ id: Int) { daemon.executor.ports.ended(id) }
    /// The job its recovered publishing phase holds, as the daemon's `RequestStartShell` takes it.
    func publish(_ id: Int) { daemon.publishing.add(daemon.machines[id]?.state.job ?? SimJob(item: id)) }
    var hasOpenItems: Bool { (daemon.groups[name]?.openItems ?? 0) > 0 }
    func scheduleDeadlines() { if let deadline { daemon.deadlines[name] = deadline } }
    func taken() { daemon.group(name, .taken) }
}

/// A worker as the ports of an adopted request's acceptance (`AdoptedIntake`, the daemon's own):
/// its items are the request's, each recovered by `recoverAdopted`; the records found published
/// are journaled as the daemon journals them.
struct SimAdoptedIntake: AdoptedIntakePorts {
    typealias Machine = SimDaemon.Machine
    unowned let daemon: SimDaemon
    let name: String
    private var world: Simulation { daemon.world }

    func add(_ items: [Int]) -> [Int] {
        daemon.groups[name] = GroupMachine(openItems: items.count)
        return items
    }
    func adopted() { daemon.ledger.adopted.insert(name) }
    func adoptionDropped() { daemon.ledger.keeper.adoptionDropped() }
    func cancelled() -> Bool { world.cancelRecords.contains(name) }
    /// The simulation has no uploads.
    func recoverUpload(_ id: Int) -> Bool { false }
    func recover(_ id: Int) -> AdoptedRecovery<(Int, ItemState)> {
        let (machine, first, confirm) = daemon.recoverAdopted(id)
        daemon.machines[id] = machine
        switch first {
        case .submit: return .schedule
        case .ended: return .ended(confirm: confirm.map { (id, $0) })
        case .publish: return .publish
        }
    }
    /// As the daemon's: the item's record ends failed, cancelled; the world counts it ended so.
    func endCancelled(_ id: Int) {
        let attempts = daemon.machines[id]?.attempts ?? 0
        let failed = ItemFailed(code: "cancelled", message: "cancelled by the operator", attempts: attempts,
                                facts: ItemFailureFacts(index: world.spec(id).index, url: "", name: ""))
        daemon.machines[id] = Machine(recovered: .failed(failed), firstQueued: world.now, attempts: attempts)
        world.log("item \(id): ends cancelled (its request's cancel record)")
        world.recordFailure(id, failed)
    }
    func journal(_ confirmed: [(Int, ItemState)]) {
        let journal = world.spool.writeJournal(writer: daemon.incarnation, items: confirmed.map {
            (world.spec($0.0), $0.1.attempts, $0.1)
        })
        world.log("\(daemon.name) journals the items found published: \(confirmed.map(\.0)) in \(journal)")
        daemon.ledger.keeper.attach(journal, to: &daemon.ledger.requestJournals[name, default: []])
    }
}

extension Simulation {
    /// Now and then (drawn aside, while faults are on) the operator cancelled one of a dying
    /// worker's requests whole just before the kill: its cancel record (`recordCancel`) was
    /// written, and no item had ended yet. The adopter ends what it would queue again cancelled
    /// (`AdoptedIntake`); the record goes with the group's end.
    func cancelBeforeKill(_ adopted: [String]) {
        guard let name = drawnAside(adopted, "cancel before kill", chance: 0.05) else { return }
        cancelRecords.insert(name)
        log("operator: cancel request \(name) whole; its cancel record is written, and the worker dies before any item ends")
    }
}

extension Simulation {
    /// One of a kill's adopted requests, now and then (`chance`, while faults are on), drawn aside
    /// from the seed's main stream by `what` and the kill's number; nil otherwise.
    func drawnAside(_ adopted: [String], _ what: String, chance: Double) -> String? {
        guard faultsOn, !adopted.isEmpty else { return nil }
        var side = sideRandom("\(what) \(kills)")
        guard side.chance(chance) else { return nil }
        return adopted[side.below(adopted.count)]
    }
}
