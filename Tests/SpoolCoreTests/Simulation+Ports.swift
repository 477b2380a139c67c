import Foundation
import SpoolCore
import SpoolRequest
import SpoolScheduler

/// A simulated worker's ports for the daemon's `ItemExecutor`: the rooms the effects reach are
/// the worker's simulated ones (its scheduler, transfers in flight, space queue, publish queue)
/// and the world's spool. Here is no executor: which port an effect goes to, with what, and
/// which answer goes back to the machine, is decided by `ItemExecutor`, as in the daemon.
final class SimItemPorts: ItemPorts {
    typealias Key = Int
    typealias Part = SimPart
    typealias Job = SimJob
    typealias Receipt = SimReceipt
    typealias Machine = ItemMachine<SimPart, SimJob, SimReceipt>

    /// Not owned: the worker owns the executor, which owns this.
    unowned let daemon: SimDaemon
    init(daemon: SimDaemon) { self.daemon = daemon }

    private var world: Simulation { daemon.world }
    /// Port calls under way that may raise an item event (a start's `partOpened`, an ending's
    /// group end): a machine deciding inside one is an event nested in another's effects, which
    /// the contract forbids (events never nest: the executor queues them).
    private var portCalls = 0

    private func portCall(_ body: () -> Void) {
        portCalls += 1
        body()
        portCalls -= 1
    }

    // MARK: The machines

    /// The context is drawn from the seed (jitter, whether a refresh hook may be asked), as
    /// the daemon reads it from its clock, stop flag and hooks.
    func decide(_ id: Int, _ event: ItemEvent<SimPart, SimJob, SimReceipt>) -> [ItemEffect<SimPart, SimJob>] {
        guard var machine = daemon.machines[id] else { return [] }
        if portCalls > 0 { daemon.violation = "item \(id) decided \(eventName(event)) inside a port call: events nest" }
        let spec = world.spec(id)
        var context = ItemContext(now: world.now, stopping: false, jitter: world.random.unitMut(),
                                  failureFacts: { ItemFailureFacts(index: spec.index, url: "http://\(spec.host)/\(spec.id)", name: "f\(spec.id)") })
        context.canRefreshURL = world.random.chanceMut(0.3)
        let effects = machine.handle(event, policy: daemon.policy, context: context)
        daemon.machines[id] = machine
        if !effects.isEmpty { world.log("item \(id): \(eventName(event)) -> \(machine.phase.label) \(effects.map(effectName))") }
        return effects
    }

    // MARK: The scheduler

    func schedule(_ id: Int) { daemon.scheduler.submit(ScheduledItem(key: id, hostKey: world.spec(id).host)) }
    func unschedule(_ id: Int) { daemon.scheduler.remove(id) }
    func releaseSlot(_ id: Int) { daemon.scheduler.finished(id) }

    func retry(_ id: Int, at: Date, holdHost: Bool) {
        if holdHost { daemon.scheduler.holdHost(world.spec(id).host, until: at) }
        daemon.scheduler.retry(id, notBefore: at)
    }

    func hostUnreachable(_ id: Int, error: String) {
        daemon.scheduler.hostUnreachable(world.spec(id).host, failedItem: id, now: world.now, error: error,
                                         jitter: world.random.unitMut())
    }

    // MARK: The transfer

    /// What a start finds, drawn from the seed while faults are on: an expired or expiring URL,
    /// refused credentials, a shortage of descriptors, a full disk.
    func checkStart(_ id: Int) -> StartCheck {
        var check = StartCheck()
        if world.faultsOn {
            switch world.random.belowMut(50) {
            case 0: check.expiresAt = world.now.addingTimeInterval(-10); check.expirySource = "expires-key"
            case 1: check.expiresAt = world.now.addingTimeInterval(10); check.expirySource = "s3-sigv4"
            case 2: check.credentialsRefused = "credentials file readable by others"
            case 3: check.loadProblem = .shortOfResources; check.loadMessage = "EMFILE"
            case 4: check.loadProblem = .diskFull; check.loadMessage = "ENOSPC"
            default: break
            }
        }
        return check
    }

    func startTransfer(_ id: Int, credentials: [RequestHeader]) {
        portCall {
            // With the store: a hit, a wait (its slot given back) or a claimed fetch (`StoreExecutor`).
            if world.store != nil { return daemon.storeRoom.startTransfer(id, credentials: credentials) }
            daemon.startFetch(id)
        }
    }

    func stopTransfer(_ id: Int, part: SimPart?) {
        if world.store != nil { daemon.storeRoom.forget(id) }
        daemon.hitReads.removeValue(forKey: id)
        daemon.transfers.removeValue(forKey: id)
        daemon.refreshes.removeValue(forKey: id)
        // Taken out of the session: the part keeps what it holds (`TransferBook.stopped`).
        if let item = daemon.book.running[id] {
            daemon.book.stopped(item, TransferReport(key: id, fault: nil, status: 0, bytesInOrder: item.bytes,
                                                     hash: SimHash(id: id, version: item.version, bytes: item.bytes),
                                                     partOpen: part != nil, facts: SimFacts(status: 0)))
        }
    }

    // The simulated spool has one source per item; its resume state is a file (Simulation+Spool.swift).
    func nextSource(_ id: Int, part: SimPart?) {}
    func saveResumeState(_ id: Int, part: SimPart?) {
        world.spool.saveResumeState(world.spec(id), attempts: daemon.machines[id]?.attempts ?? 0)
    }

    /// The hook answers a second later (`SimDaemon.turn`).
    func refreshURL(_ id: Int, reason: String) -> ItemEvent<SimPart, SimJob, SimReceipt>? {
        daemon.refreshes[id] = world.now.addingTimeInterval(1)
        return nil
    }

    // MARK: The space gate

    func waitForSpace(_ id: Int, reason: String) { daemon.spaceQueue.wait(id, now: world.now) }
    func leaveSpaceQueue(_ id: Int) { daemon.spaceQueue.leave(id) }

    // MARK: Publishing

    func publish(_ id: Int, sha256: String, part: SimPart?) -> SimJob? {
        // What is published is one whole version of the resource (`SimTransferPorts.digest`).
        if sha256.hasPrefix("partial-") { daemon.violation = "item \(id) publishes a part that is no whole version: \(sha256)" }
        world.stage(id)
        world.spool.verified(world.spec(id), sha256: sha256)
        let job = SimJob(item: id)
        daemon.publishing.add(job)
        return job
    }

    func retryPublish(_ id: Int, job: SimJob?, at: Date) {
        daemon.publishing.retry(job ?? SimJob(item: id), at: at)
    }

    func withdrawPublish(_ id: Int) -> Bool {
        daemon.publishing.withdraw { $0.item == id }
    }

    // MARK: The item's files and its ending

    func discardPartial(_ id: Int) {
        world.spool.discardPart(world.spool.base(world.spec(id)))
        daemon.parts[id]?.discard()
    }
    func keepPartialForRetry(_ id: Int) {}

    func failed(_ id: Int, _ failure: ItemFailed, wasPublishing: Bool) {
        // Its job dropped from the publisher, as the daemon's `Publishing.drop` does.
        if wasPublishing { daemon.publishing.drop { $0.item == id } }
        daemon.transfers.removeValue(forKey: id)
        daemon.refreshes.removeValue(forKey: id)
        daemon.book.forget(id)
        daemon.parts.removeValue(forKey: id)
        world.releaseStaging(id)
        // Its data went into the final folder and its marker never followed (a marker-only job
        // left unwritten): the file stays there unmarked, which no consumer takes; no publication.
        if wasPublishing, daemon.ledger.markerOnly.removeValue(forKey: id) != nil {
            world.log("item \(id): fails with its data in the final folder unmarked")
            world.unpublished(id, placed: nil)
        }
        world.recordFailure(id, failure)
    }

    func ended(_ id: Int) {
        portCall {
            world.releaseStaging(id)
            daemon.parts.removeValue(forKey: id)
            daemon.itemEnded(id)
        }
    }

    // MARK: The trace's words

    private func eventName(_ e: ItemEvent<SimPart, SimJob, SimReceipt>) -> String {
        switch e {
        case .transferEnded(let end, _): return "transferEnded(\(end.fault?.description ?? "complete")\(end.outage ? ", outage" : ""))"
        case .publishFailed(let f, _): return "publishFailed(\(f.message))"
        case .partOpened: return "partOpened"
        case .publishQueued: return "publishQueued"
        default: return "\(e)"
        }
    }

    /// An effect as the trace names it: words only (carrying effects out is `ItemExecutor`'s);
    /// times relative to now, the part and job an effect carries left out.
    private func effectName(_ e: ItemEffect<SimPart, SimJob>) -> String {
        if case .retry(let at, let hold) = e { return "retry(+\(Int(at.timeIntervalSince(world.now)))s\(hold ? ", hold" : ""))" }
        if case .retryPublish(let at, _) = e { return "retryPublish(+\(Int(at.timeIntervalSince(world.now)))s)" }
        if let code = e.failCode { return "fail(\(code))" }
        if case .publish(let digest, _) = e { return "publish(sha256: \"\(digest)\")" }
        if case .stopTransfer = e { return "stopTransfer" }
        if case .saveResumeState = e { return "saveResumeState" }
        if case .nextSource = e { return "nextSource" }
        return "\(e)"
    }
}

/// A simulated worker's group-end room as the ports of the daemon's `GroupEndExecutor`: the
/// machines are the worker's table; the end's write fails now and then while faults are on
/// (drawn apart from the seed's main stream) and is answered at once (queued by the executor
/// behind the event being handled); here is no dispatch of effects, which is the executor's.
final class SimGroupEndPorts: GroupEndPorts {
    typealias Key = String
    typealias Written = Void

    /// Not owned: the worker owns the executor, which owns this.
    unowned let daemon: SimDaemon
    init(daemon: SimDaemon) { self.daemon = daemon }

    private var world: Simulation { daemon.world }

    func decide(_ name: String, _ event: GroupMachine.Event, now: Date) -> [GroupMachine.Effect] {
        guard var machine = daemon.groups[name] else { return [] }
        let effects = machine.handle(event, now: now)
        daemon.groups[name] = machine
        return effects
    }

    func writeEnd(_ name: String) {
        daemon.groupEndTries[name, default: 0] += 1
        if world.faultsOn && world.sideChance(0.1, "group end \(name) \(daemon.groupEndTries[name]!)") {
            world.log("group end of \(name) failed: EIO")
            daemon.groupEnds.send(.endFailed(GroupEndFault()), to: name, now: world.now)
        } else {
            let all = world.request(name).items.allSatisfy { if case .published = world.disk($0) { return true } else { return false } }
            world.groupEnded(name, allPublished: all)
            world.cancelRecords.remove(name)
            // As `GroupEnds`: the staging files of the items noted as having some; a void is
            // noted only by a recovery (`RecoveryCarrier`). None may outlive the group's end.
            for id in world.request(name).items {
                let base = world.spool.base(world.spec(id))
                let noted = daemon.ledger.stagingNoted.remove(id) != nil || daemon.parts[id]?.hasStateFile == true
                world.spool.removeStaging(base, voided: noted)
                if world.spool.voidedRecords[base] != nil {
                    daemon.violation = "item \(id): its staging/B.voided outlived its group's end (\(name))"
                }
            }
            daemon.groupEnds.send(.endWritten, to: name, now: world.now)
        }
    }

    func forget(_ name: String, written: Void?) {
        daemon.groups.removeValue(forKey: name)
        daemon.deadlines.removeValue(forKey: name)
        daemon.releaseJournals(name)
        for id in world.request(name).items { daemon.machines.removeValue(forKey: id) }
    }

    func retry(_ name: String, at: Date) { daemon.groupRetries[name] = at }

    /// The simulated spool neither fences a stalled worker nor runs drains that let go.
    func letGo(_ name: String, _ why: GroupLetGo) {
        daemon.violation = "request \(name) was let go without an end"
    }
}
