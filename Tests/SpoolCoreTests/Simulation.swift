import Foundation
import SpoolCore
import SpoolScheduler

/// A deterministic simulation of the daemon's decisions, in the manner of FoundationDB's
/// simulation testing and TigerBeetle's VOPR: the real core (`ItemMachine`) and the real
/// scheduler (`Scheduler`) are driven from a seed, with a simulated clock, spool, network and
/// disks standing in for the shell's adapters. Faults of every kind are injected — transfer
/// outcomes (bytes, cuts, 4xx, 5xx, 429 with Retry-After, outages, changed resources, expired
/// URLs), full disks on staging and the final folder at publish time, hosts going down and up,
/// kills and restarts at any step (recovering from what the simulated spool holds), operator
/// commands at any moment (twice), deadlines — and the contract's invariants are checked after
/// every step. Once faults stop, everything must end within bounded simulated time.
///
/// The same seed gives the same trace. A failing seed throws `SimulationFailure` with the trace's
/// last lines; it then belongs in `SimulationTests.regressionSeeds`.
final class Simulation {
    struct Settings {
        var steps = 400
        /// Steps with faults; after them the network and disks behave and paused items resume.
        var faultSteps = 300
        var maxRequests = 8
        var maxItemsPerRequest = 4
        var hosts = ["a:80", "b:80", "c:443"]
        /// Simulated seconds allowed, after faults stop, for everything to end.
        var settleSeconds: Double = 3 * 86_400
        /// The content store on (`--store`, Simulation+Store.swift): some items carry a `sha256:`
        /// of a few shared digests. Off, the simulation draws exactly as it did before the store.
        var contentStore = false
        /// Each worker a drain (`run --once`): its watcher let go by the core's `DrainWatch`
        /// (Simulation+Drain.swift). Off, the traces are as before.
        var drainWatch = false
    }

    // MARK: The world: what survives a kill (the spool, the network, the disks)

    struct ItemSpec {
        let id: Int
        let request: String
        let index: Int
        let host: String
        let bytes: Int64
        /// The request says how large it will be (`expected-bytes`).
        let announced: Bool
        /// Its `sha256:` (only with the content store on): a few digests shared by many items.
        var digest: String? = nil
    }

    enum RequestFolder: Equatable { case active, done, failed, rejected }

    struct RequestFile {
        let name: String
        var items: [Int]
        var folder: RequestFolder = .active
        /// When its `deadline:` passes (nil: none).
        let deadline: Date?
        /// Times its group ended (must be at most one).
        var endings = 0
    }

    /// What the spool says about an item: its verified part journaled, or ended.
    enum ItemOnDisk { case nothing, staged, published, failed(ItemFailed) }

    private(set) var trace: [String] = []
    private var rng: SimRandom
    private let settings: Settings
    private(set) var now = Date(timeIntervalSince1970: 1_900_000_000)
    private var faults = true
    private var items: [Int: ItemSpec] = [:]
    private(set) var requests: [String: RequestFile] = [:]
    private var requestOrder: [String] = []
    /// Requests the operator cancelled whole whose cancel record is in staging (`cancelBeforeKill`).
    var cancelRecords: Set<String> = []
    /// Adopted requests the adopter's parser refuses (`refuseOnAdoption`).
    var refusedOnAdoption: Set<String> = []
    private var onDisk: [Int: ItemOnDisk] = [:]
    private(set) var publishes: [Int: Int] = [:]
    private var hostsDown: Set<String> = []
    private let stagingCapacity: Int64 = 64 << 20
    private let finalCapacity: Int64 = 48 << 20
    private var stagingTaken: Int64 = 0
    /// Bytes other programs hold on the final folder's filesystem (a fault fills it).
    private var finalForeign: Int64 = 0 { didSet { if finalForeign < oldValue { finalFreed += 1 } } }
    private var finalPublished: Int64 = 0 { didSet { if finalPublished < oldValue { finalFreed += 1 } } }
    /// Times space was freed on the final folder's filesystem (Simulation+Operators.swift).
    private(set) var finalFreed = 0
    /// The operator paths' memory: requests as written, names, retries (Simulation+Operators.swift).
    let operatorSpool: SimOperatorSpool
    private let minFree: Int64 = 1 << 20
    /// Two workers on the one spool, each with its own memory (machines, scheduler, queues).
    private var workers: [SimDaemon] = []
    /// Which worker holds each claimed request (a claim is one rename: exactly one).
    private var owner: [String: Int] = [:]
    private var reloads = 0
    private var nextItemID = 0
    private(set) var kills = 0
    /// The content store on the spool (nil: off).
    let store: SimContentStore?
    /// Worker processes started so far: each has its own number (a claim names its holder's).
    private var incarnations = 0
    /// The spool's files (Simulation+Spool.swift): what a recovery after a kill reads.
    let spool = SimSpool()
    /// Each item's resource version now (absent: 0), replaced now and then (Simulation+Transfers.swift).
    var versions: [Int: Int] = [:]

    init(seed: UInt64, settings: Settings = Settings()) {
        rng = SimRandom(seed: seed)
        self.settings = settings
        operatorSpool = SimOperatorSpool(seed: seed)
        store = settings.contentStore ? SimContentStore() : nil
        workers = [SimDaemon(world: self, name: "w0"), SimDaemon(world: self, name: "w1")]
    }

    private func eachWorker(_ body: (SimDaemon) -> Void) { for w in workers { body(w) } }
    var workersForChecks: [SimDaemon] { workers }
    func nextIncarnation() -> Int { incarnations += 1; return incarnations }
    /// Whether the worker process `incarnation` still runs (a kill ends it).
    func isLive(_ incarnation: Int) -> Bool { workers.contains { $0.incarnation == incarnation } }
    private var describeOpen: String { workers.map { "\($0.name): \($0.describeOpen())" }.joined(separator: "; ") }

    func log(_ line: String) {
        trace.append(String(format: "%9.1f ", now.timeIntervalSince1970 - 1_900_000_000) + line)
    }

    // MARK: Running

    /// Runs the seed's steps, then lets everything settle; throws at the first broken invariant.
    func run() throws {
        for step in 0 ..< settings.steps {
            if step == settings.faultSteps { stopFaults() }
            try oneStep()
            try checkInvariants()
        }
        if faults { stopFaults() }
        eachWorker { $0.resumeAllPaused() }
        eachWorker { $0.turn() }
        let settleBy = now.addingTimeInterval(settings.settleSeconds)
        var turns = 0
        while !allEnded {
            turns += 1
            guard now < settleBy, turns < 100_000 else {
                throw failure("not everything ended within \(Int(settings.settleSeconds)) s after faults stopped: "
                              + describeOpen)
            }
            guard advanceToNextEvent() else {
                throw failure("nothing left to happen, yet items have not ended (no exit): " + describeOpen)
            }
            try checkInvariants()
        }
        // Every request has ended: no publish journal may be left in staging (a dead worker's
        // goes once every request adopted with it has ended or was dropped; `JournalKeeper`).
        if !spool.journals.isEmpty {
            throw failure("every request ended, yet journals are left in staging: \(spool.journals.keys.sorted())")
        }
    }

    var allEnded: Bool { requests.values.allSatisfy { $0.folder != .active } }

    private func stopFaults() {
        faults = false
        log("faults stop: hosts up, disks emptied of foreign files, paused items resumed")
        hostsDown = []
        finalForeign = 0
        finalPublished = 0
        eachWorker { $0.networkChanged() }
        eachWorker { $0.resumeAllPaused() }
    }

    private func oneStep() throws {
        let roll = rng.below(100)
        switch roll {
        case 0 ..< 12 where requestOrder.count < settings.maxRequests:
            dropRequest()
        case 12 ..< 22:
            operatorCommand()
        case 22 ..< 26 where faults:
            let host = settings.hosts[rng.below(settings.hosts.count)]
            if hostsDown.remove(host) == nil { hostsDown.insert(host); log("host \(host) goes down") }
            else { log("host \(host) comes back"); eachWorker { $0.networkChanged() } }
        case 26 ..< 29 where faults:
            finalForeign = rng.chance(0.5) ? Int64(rng.below(Int(finalCapacity))) : 0
            log("another program now holds \(finalForeign) bytes on the final folder's filesystem")
        case 29 ..< 31 where faults:
            kill()
        case 36 ..< 38:
            reload()
        case 31 ..< 36:
            if finalPublished > 0 { log("a consumer takes the published files away") }
            finalPublished = 0
            spool.consumerTakes()
            operatorSpool.finalNames = []
        default:
            _ = advanceToNextEvent()
        }
        eachWorker { $0.turn() }
    }

    /// Moves the clock to the next thing that happens and lets it happen; false when nothing will.
    @discardableResult
    private func advanceToNextEvent() -> Bool {
        guard let next = workers.compactMap({ $0.nextDeadline() }).min() else { return false }
        if next > now { now = next }
        eachWorker { $0.turn() }
        return true
    }

    private func dropRequest() {
        let name = "r\(requestOrder.count)"
        let count = 1 + rng.below(settings.maxItemsPerRequest)
        var ids: [Int] = []
        for index in 0 ..< count {
            let id = nextItemID
            nextItemID += 1
            // Mostly small bodies; now and then one larger than the final folder's filesystem.
            let bytes: Int64 = rng.chance(0.05) ? (rng.chance(0.5) ? finalCapacity : stagingCapacity) + Int64(rng.below(1 << 20))
                                                : Int64(1 + rng.below(4 << 20))
            items[id] = ItemSpec(id: id, request: name, index: index, host: settings.hosts[rng.below(settings.hosts.count)],
                                 bytes: bytes, announced: rng.chance(0.5))
            if settings.contentStore {
                // Drawn aside (the main stream as without the store): 60 % carry one of 4 digests.
                var side = sideRandom("digest \(id)")
                if side.chance(0.6) {
                    let k = side.below(4)
                    let spec = items[id]!
                    items[id] = ItemSpec(id: id, request: name, index: index, host: spec.host, bytes: Int64(k + 1) << 19,
                                         announced: spec.announced, digest: "d\(k)")
                }
            }
            onDisk[id] = .nothing
            ids.append(id)
        }
        let deadline = rng.chance(0.15) ? now.addingTimeInterval(Double(60 + rng.below(7200))) : nil
        requests[name] = RequestFile(name: name, items: ids, deadline: deadline)
        requestOrder.append(name)
        let w = rng.below(workers.count)
        owner[name] = w
        log("request \(name) dropped: items \(ids)" + (deadline.map { " deadline +\(Int($0.timeIntervalSince(now)))s" } ?? "")
            + ", claimed by \(workers[w].name)")
        writeRequestText(name, items: ids)
        workers[w].claim(name)
        _ = dropMalformedRequest(after: name, worker: w)
    }

    /// A request the operator's `retry` of a failed request queued (Simulation+Operators.swift):
    /// each item re-runs `first`'s body from its host; claimed by `worker`. Returns the new ids.
    func addRetryRequest(_ name: String, items wanted: [(first: ItemSpec, index: Int, announced: Bool)], worker w: Int) -> [Int] {
        var ids: [Int] = []
        for item in wanted {
            let id = nextItemID
            nextItemID += 1
            items[id] = ItemSpec(id: id, request: name, index: item.index, host: item.first.host, bytes: item.first.bytes,
                                 announced: item.announced, digest: item.first.digest)
            onDisk[id] = .nothing
            ids.append(id)
        }
        requests[name] = RequestFile(name: name, items: ids, deadline: nil)
        requestOrder.append(name)
        owner[name] = w
        workers[w].claim(name)
        return ids
    }

    private func operatorCommand() {
        guard !items.isEmpty else { return }
        let id = rng.below(nextItemID)
        let verb = OperatorVerb.allCases[rng.below(OperatorVerb.allCases.count)]
        let times = rng.chance(0.3) ? 2 : 1
        guard let w = owner[items[id]!.request] else { return }
        if verb == .retry, requests[items[id]!.request]?.folder == .failed {
            retryEnded(item: id, times: times)
            return
        }
        if verb == .retry { operatorRetried(id) }
        for _ in 0 ..< times {
            log("operator: \(verb.rawValue) item \(id)")
            workers[w].operatorCommand(verb, item: id)
        }
    }

    /// One worker is killed and starts again; its claims pass whole to one adopter (itself
    /// restarted, or the other worker), which recovers each request from what the spool holds.
    private func kill() {
        let dead = rng.below(workers.count)
        killWorker(dead, adopter: rng.below(workers.count))
    }

    /// Worker `dead` is killed and starts again; `adopter` takes its claims over (Simulation+Spool.swift
    /// kills one in the middle of a publish batch).
    func killWorker(_ dead: Int, adopter: Int) {
        kills += 1
        let name = workers[dead].name
        let deadIncarnation = workers[dead].incarnation
        workers[dead] = SimDaemon(world: self, name: name)
        spool.foldersTaken(from: deadIncarnation, by: workers[adopter].incarnation)
        log("kill -9 of \(name) and restart (#\(kills)); \(workers[adopter].name) adopts its requests")
        let adopted = requestOrder.filter { requests[$0]?.folder == .active && owner[$0] == dead }
        cancelBeforeKill(adopted)
        refuseOnAdoption(adopted)
        workers[adopter].learnDeadJournals(adopting: adopted.count)
        for request in adopted {
            owner[request] = adopter
            workers[adopter].claim(request, adopted: true)
        }
    }

    /// A configuration reload (SIGHUP): new limits and retry policy for every worker.
    private func reload() {
        reloads += 1
        let concurrency = 1 + rng.below(6), perHost = 1 + rng.below(3), attempts = 2 + rng.below(8)
        log("reload (#\(reloads)): concurrency \(concurrency), per-host \(perHost), max-attempts \(attempts)")
        eachWorker { $0.reload(concurrency: concurrency, perHost: perHost, maxAttempts: attempts) }
    }

    // MARK: What the daemon's adapters see of the world

    func spec(_ id: Int) -> ItemSpec { items[id]! }
    func request(_ name: String) -> RequestFile { requests[name]! }
    func requestFolder(_ name: String) -> RequestFolder? { requests[name]?.folder }
    /// A malformed request file (`dropMalformedRequest`): no item, and never adopted.
    func addMalformed(_ name: String) { requests[name] = RequestFile(name: name, items: [], deadline: nil) }
    /// The claiming worker's parser refused it: filed in `rejected/`.
    func requestRejected(_ name: String) { requests[name]?.folder = .rejected }
    func disk(_ id: Int) -> ItemOnDisk { onDisk[id] ?? .nothing }
    var random: SimRandom {
        get { rng }
        set { rng = newValue }
    }
    var faultsOn: Bool { faults }
    var drainOn: Bool { settings.drainWatch }

    func isDown(_ host: String) -> Bool { hostsDown.contains(host) }

    /// A draw of its own for `key` (from the seed and the key, FNV-1a), leaving the seed's main
    /// stream alone: a fault added to the simulation does not change every trace it does not touch.
    func sideChance(_ p: Double, _ key: String) -> Bool {
        var side = sideRandom(key)
        return side.chance(p)
    }

    func sideRandom(_ key: String) -> SimRandom {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return SimRandom(seed: rng.seed ^ hash)
    }

    /// The space gate's answer for item `id`'s body in staging (and the final folder, where it
    /// must fit at all): its own part's space is already counted.
    /// Decided by the core's `SpaceRules` on the simulated filesystems, as `SpaceGate` decides on
    /// the real ones; the final folder, on a filesystem of its own, must be able to hold the body.
    func stagingAnswer(_ id: Int) -> SpaceAnswer {
        let bytes = size(id, version(id))
        let answer = SpaceRules.answer(needed: inStaging[id] != nil ? 0 : bytes, reserved: 0, on: [stagingSpace])
        if case .never = answer { return answer }
        if let why = SpaceRules.never(bytes: bytes, on: finalSpace) { return .never(reason: why) }
        return answer
    }

    /// The simulated filesystems as the shell reads them.
    var stagingSpace: FilesystemSpace {
        FilesystemSpace(path: "staging", filesystem: "sim", free: stagingCapacity - stagingTaken, capacity: stagingCapacity,
                        minFree: minFree)
    }
    var finalSpace: FilesystemSpace {
        FilesystemSpace(path: "final", filesystem: "sim", free: finalFree, capacity: finalCapacity, minFree: minFree)
    }

    var finalFree: Int64 { finalCapacity - finalForeign - finalPublished }

    /// Items whose part holds staging space (from their first start until they end), and how
    /// much: the size of the resource's version when it first started.
    private var inStaging: [Int: Int64] = [:]

    /// The part takes its body's space in staging; false (and nothing taken) when it does not
    /// fit: its writes will hit ENOSPC.
    func reserveStaging(_ id: Int) -> Bool {
        if inStaging[id] != nil { return true }
        let bytes = size(id, version(id))
        guard stagingTaken + bytes <= stagingCapacity else { return false }
        inStaging[id] = bytes
        stagingTaken += bytes
        return true
    }

    func releaseStaging(_ id: Int) {
        if let bytes = inStaging.removeValue(forKey: id) { stagingTaken -= bytes }
    }

    func stage(_ id: Int) { onDisk[id] = .staged }

    /// A publish into the final folder, as the publisher does it: the bytes (a copy: the final
    /// folder is on a filesystem of its own) and room for the marker and journal must fit.
    func publish(_ id: Int) -> PublishFault? {
        let bytes = spec(id).bytes
        if finalFree - minFree < bytes + SpaceRules.publishHeadroom {
            publishHitFullDisk(id, freed: finalFreed, kills: kills)
            // Whether it can ever fit there is `PublishEnding`'s to ask (Simulation+Publish.swift).
            return PublishFault(diskFull: true, message: "ENOSPC on final: \(finalFree) free, \(bytes) needed")
        }
        if faults && rng.chance(0.05) { return PublishFault(message: "EIO on final") }
        if faults { finalPublished += bytes }
        publishes[id, default: 0] += 1
        onDisk[id] = .published
        placePublished(id)
        return nil
    }

    /// A batch renamed the item's data into the final folder, and its worker died before its
    /// marker (Simulation+Spool.swift): the data is there, as a publish puts it.
    func renamedBeforeCrash(_ id: Int) -> String? {
        if faults { finalPublished += spec(id).bytes }
        releaseStaging(id)
        publishes[id, default: 0] += 1
        onDisk[id] = .published
        let before = operatorSpool.finalNames
        placePublished(id)
        return operatorSpool.finalNames.subtracting(before).first
    }

    /// A data file no marker ever vouched for was removed by a recovery (its bytes were not the
    /// journaled digest): it was not published after all.
    func unpublished(_ id: Int, placed: String?) {
        publishes[id, default: 1] -= 1
        onDisk[id] = .nothing
        if let placed { operatorSpool.finalNames.remove(placed) }
        let first = operatorSpool.origin[id] ?? id
        operatorSpool.publishedByOrigin[first]?.removeAll { $0 == id }
    }

    func recordFailure(_ id: Int, _ failed: ItemFailed) {
        onDisk[id] = .failed(failed)
        spool.failed(spec(id), failed)
    }

    func groupEnded(_ name: String, allPublished: Bool) {
        requests[name]!.endings += 1
        requests[name]!.folder = allPublished ? .done : .failed
        log("group \(name) ended: \(allPublished ? "done" : "failed")")
    }

    // MARK: Invariants

    struct SimulationFailure: Error, CustomStringConvertible {
        let seed: UInt64
        let what: String
        let trace: [String]
        var description: String {
            "seed \(seed): \(what)\nlast \(min(trace.count, 60)) trace lines:\n" + trace.suffix(60).joined(separator: "\n")
        }
    }

    private func failure(_ what: String) -> SimulationFailure {
        SimulationFailure(seed: rng.seed, what: what, trace: trace)
    }

    private func checkInvariants() throws {
        for (id, count) in publishes where count > 1 {
            throw failure("item \(id) was published \(count) times")
        }
        for request in requests.values {
            if request.endings > 1 { throw failure("request \(request.name) ended \(request.endings) times") }
            if request.folder != .active && request.folder != .rejected {
                let ended = request.items.allSatisfy { id in
                    switch disk(id) { case .published, .failed: return true; default: return false }
                }
                if !ended { throw failure("request \(request.name) was filed before all its items ended") }
            }
        }
        if let broken = try checkOperatorPaths() { throw failure(broken) }
        if let broken = checkStore() { throw failure(broken) }
        if let broken = spool.checkMarkers() { throw failure(broken) }
        for worker in workers {
            if let violation = worker.violation { throw failure("\(worker.name): \(violation)") }
            do { try worker.checkExits(); try worker.checkStatus() } catch { throw failure("\(worker.name): \(error)") }
        }
    }
}

/// The part of the simulation that a kill loses: the daemon's memory. Its items' events go
/// through the daemon's own `ItemExecutor`; its simulated rooms (scheduler, transfers in flight,
/// space queue, publishing, group ends) are the executor's ports (`SimItemPorts`).
final class SimDaemon {
    typealias Machine = ItemMachine<SimPart, SimJob, SimReceipt>

    unowned let world: Simulation
    let name: String
    /// This worker process's number (a restart is a new one).
    let incarnation: Int
    /// Its memory of its publish journals (Simulation+Spool.swift).
    lazy var ledger = SimLedger(world: world)
    /// Its memory of the content store: the daemon's own `StoreExecutor` (Simulation+Store.swift).
    lazy var storeRoom = StoreExecutor(ports: SimStorePorts(daemon: self), timing: Self.storeTiming)
    /// Its drain watcher, as a look (Simulation+Drain.swift).
    let drain = SimDrainLook()
    var scheduler = Scheduler(configuration: SchedulerConfiguration(concurrency: 4, perHost: 2,
                                                                            probeBackoff: Backoff(base: 2, cap: 120)),
                                      timeZone: TimeZone(identifier: "UTC")!)
    var policy: RetryPolicy = {
        var p = RetryPolicy(maxAttempts: 6, resourceTimeout: 86_400, backoff: Backoff(base: 1, cap: 60))
        p.maxPublishTries = 8
        return p
    }()
    var machines: [Int: Machine] = [:]
    /// Each claimed request's group: the core's machine, as the shell's group-end room keeps it.
    var groups: [String: GroupMachine] = [:]
    /// Group ends whose write failed: when each is tried again.
    var groupRetries: [String: Date] = [:]
    var groupEndTries: [String: Int] = [:]
    /// Transfers in flight: when each reports.
    var transfers: [Int: Date] = [:]
    /// Items waiting for space: the core's queue, as the shell's `SpaceGate` keeps it.
    var spaceQueue = SpaceQueue<Int>()
    /// The publishing room's queue: the core's rules, as the shell's `Publishing` keeps them.
    var publishing = PublishQueue<SimJob>()
    /// The batch on the simulated I/O queue: when it reports, and the jobs it holds.
    private var batch: (at: Date, jobs: [SimJob])?
    /// Items told to cancel while a batch held their job: they must end when it reports.
    var cancelledInBatch: Set<Int> = []
    /// Deadlines not yet passed, per request.
    var deadlines: [String: Date] = [:]
    var violation: String?
    var refreshes: [Int: Date] = [:]
    /// Running items whose part found no room in staging: their transfer ends with ENOSPC.
    var noRoom: Set<Int> = []
    /// The daemon's own transfer bookkeeping (`TransferBook`), over this worker's simulated parts
    /// (Simulation+Transfers.swift); `parts`: every item's part, kept between attempts.
    lazy var book = TransferBook(ports: SimTransferPorts(daemon: self))
    var parts: [Int: SimTransferItem] = [:]

    init(world: Simulation, name: String) {
        self.world = world
        self.name = name
        incarnation = world.nextIncarnation()
    }

    func reload(concurrency: Int, perHost: Int, maxAttempts: Int) {
        scheduler.reconfigure(SchedulerConfiguration(concurrency: concurrency, perHost: perHost,
                                                     probeBackoff: Backoff(base: 2, cap: 120)))
        policy.maxAttempts = maxAttempts
    }

    // MARK: Events in

    /// Takes request `name` in: a new one queued whole; an `adopted` one (a kill's) accepted by
    /// the daemon's `AdoptedIntake`, each item recovered as the daemon's recovery plans and
    /// carries it out on the spool's files (`recoverAdopted`); both started by the daemon's
    /// `RequestStart` (first steps, deadlines while the group has open items, the group taken).
    func claim(_ name: String, adopted: Bool = false) {
        let request = world.request(name)
        let start = SimRequestStart(daemon: self, name: name, deadline: request.deadline)
        guard adopted else {
            guard let items = parsedItems(name) else { return }
            groups[name] = GroupMachine(openItems: items.count)
            for id in items { machines[id] = Machine(firstQueued: world.now) }
            RequestStart.start(fresh: items, ports: start)
            return
        }
        let read: RequestRead<[Int]> = world.refusedOnAdoption.contains(name) ? .rejected : .indexed(request.items)
        guard let steps = AdoptedIntake.accept(read, ports: SimAdoptedIntake(daemon: self, name: name)) else {
            world.log("\(name) refused on adoption: filed in rejected/")
            world.requestRejected(name)
            return
        }
        RequestStart.start(adopted: steps, ports: start)
    }

    func operatorCommand(_ verb: OperatorVerb, item id: Int) {
        guard machines[id] != nil else { return }
        let was = machines[id]!.phase
        if verb == .retry, was == .retrying { scheduler.releaseHold(world.spec(id).host) }
        let effects = send(.operatorCommand(verb), to: id)
        drainSawCommand(effects, item: id)
        guard verb == .cancel, !was.hasEnded else { return }
        let ended = machines[id]?.phase.hasEnded ?? true
        let inBatch = batch?.jobs.contains { $0.item == id } ?? false
        if !ended && !(machines[id]?.phase == .publishing && inBatch) {
            violation = "cancel did not end item \(id) in phase \(was.label) (effects \(effects))"
        }
        if !ended { cancelledInBatch.insert(id) }
    }

    func resumeAllPaused() {
        for (id, machine) in machines.sorted(by: { $0.key < $1.key }) where machine.phase == .paused {
            send(.operatorCommand(.resume), to: id)
        }
    }

    func networkChanged() { _ = scheduler.probeNow(world.now) }

    /// Everything due now: transfer and batch reports, retries, space checks, deadlines, starts.
    func turn() {
        let now = world.now
        for (name, at) in deadlines.sorted(by: { $0.key < $1.key }) where at <= now {
            deadlines.removeValue(forKey: name)
            world.log("deadline of \(name) passed")
            for id in world.request(name).items { send(.deadlinePassed, to: id) }
        }
        for (name, at) in groupRetries.sorted(by: { $0.key < $1.key }) where at <= now {
            groupRetries.removeValue(forKey: name)
            group(name, .retryDue)
        }
        for (id, at) in refreshes.sorted(by: { $0.key < $1.key }) where at <= now {
            refreshes.removeValue(forKey: id)
            send(world.random.chanceMut(0.7) ? .urlRefreshed : .refreshFailed(message: "the hook gave no URL"), to: id)
        }
        for (id, at) in transfers.sorted(by: { $0.key < $1.key }) where at <= now {
            transfers.removeValue(forKey: id)
            transferEnds(id)
        }
        if let b = batch, b.at <= now {
            batch = nil
            publishing.batchEnded()
            let journal = world.spool.writeJournal(writer: incarnation, items: b.jobs.map {
                (world.spec($0.item), machines[$0.item]?.attempts ?? 0, ledger.markerOnly[$0.item]?.state)
            })
            if crashesMidBatch(b.jobs, journal: journal) { return }
            for job in b.jobs { batchReports(job, journal: journal) }
            attachJournal(journal, jobs: b.jobs)
        }
        if let jobs = publishing.takeBatch(now: now) { batch = (now.addingTimeInterval(0.05), jobs) }
        for id in spaceQueue.release(now: now, fits: fits) { send(.spaceAvailable, to: id) }
        storeTurn()
        for action in scheduler.nextActions(now: now) {
            switch action {
            case .start(let key):
                if world.store != nil, storeRoom.slotGranted(key) { break }
                let spec = world.spec(key)
                send(.slotGranted(space: spec.announced ? world.stagingAnswer(key) : .fits), to: key)
            case .pause(let key):
                send(.preempted, to: key)
            }
        }
        tendDrainWatch()
    }

    private func fits(_ id: Int) -> Bool {
        let spec = world.spec(id)
        if machines[id]?.phase == .waitingToPublish {
            return SpaceRules.publishShortage(bytes: spec.bytes, copies: true, final: world.finalSpace) == nil
        }
        // The gate knows only the expected size: without one, it lets the item try again.
        guard spec.announced else { return true }
        if case .fits = world.stagingAnswer(id) { return true }
        return false
    }

    func nextDeadline() -> Date? {
        var all: [Date] = Array(transfers.values) + Array(refreshes.values) + Array(deadlines.values)
            + Array(groupRetries.values)
        if let b = batch { all.append(b.at) }
        if let s = spaceQueue.checkAt { all.append(s) }
        if world.store != nil { all += [storeRoom.nextCheck].compactMap { $0 } + hitReads.values.map(\.at) }
        if let at = publishing.handOverAt { all.append(max(at, world.now)) }
        if let w = scheduler.nextWakeup(now: world.now) { all.append(w) }
        return all.min()
    }

    // MARK: The machine's entry

    /// The daemon's own executor (`ItemExecutor`), given this worker's simulated rooms as its
    /// ports (Simulation+Ports.swift): item events one at a time, effects carried out by the
    /// code the daemon runs.
    lazy var executor = ItemExecutor(ports: SimItemPorts(daemon: self))

    @discardableResult
    func send(_ event: ItemEvent<SimPart, SimJob, SimReceipt>, to id: Int) -> [ItemEffect<SimPart, SimJob>] {
        executor.send(event, to: id) ?? []
    }

    /// The item's transfer starts from its source.
    func startFetch(_ id: Int) {
        world.spool.partOpened(world.spool.base(world.spec(id)))
        if case .published = world.disk(id) { violation = "item \(id) is fetched again after it was published" }
        if world.cancelRecords.contains(world.spec(id).request) {
            violation = "item \(id) is fetched after the operator cancelled its request \(world.spec(id).request) whole"
        }
        if world.store != nil, storeRoom.servedFromStore(id) { violation = "item \(id) fetches after it was published from the store" }
        if !world.reserveStaging(id) { noRoom.insert(id) }
        let item = parts[id] ?? SimTransferItem(id: id)
        parts[id] = item
        if let broken = item.begin() { violation = broken }
        book.started(id, item)
        send(.partOpened(SimPart(item: id)), to: id)
        transfers[id] = world.now.addingTimeInterval(0.1 + Double(world.random.belowMut(600)) / 10)
    }

    func isTransferring(_ id: Int) -> Bool { transfers[id] != nil }

    func itemEnded(_ id: Int) {
        if world.store != nil { storeRoom.itemEnded(id) }
        spaceQueue.leave(id)
        cancelledInBatch.remove(id)
        group(world.spec(id).request, .itemEnded)
    }

    /// The daemon's own group-end executor (`GroupEndExecutor`), given this worker's simulated
    /// group-end room as its ports (`SimGroupEndPorts`, Simulation+Ports.swift).
    lazy var groupEnds = GroupEndExecutor(ports: SimGroupEndPorts(daemon: self))

    /// Hands the request's group machine an event; its effects carried out by the executor.
    func group(_ name: String, _ event: GroupMachine.Event) {
        groupEnds.send(event, to: name, now: world.now)
    }

    // MARK: Invariants of the daemon's memory

    /// Every item not ended has an exit: a timer, an effect in flight, or a condition (space, a
    /// host, a start time) that its state names; no host or space record outlives its items.
    func checkExits() throws {
        for (id, machine) in machines.sorted(by: { $0.key < $1.key }) {
            let ok: Bool
            switch machine.phase {
            case .queued, .retrying: ok = scheduler.holds(id)
            case .running: ok = transfers[id] != nil || refreshes[id] != nil || hitReads[id] != nil || storeHasExit(id)
            case .waitingForSpace, .waitingToPublish: ok = spaceQueue.contains(id) && spaceQueue.checkAt != nil
            case .paused: ok = true   // the operator's `resume` or `cancel`, named by status
            case .publishing:
                ok = publishing.holds { $0.item == id } || (batch?.jobs.contains { $0.item == id } ?? false)
            case .published, .failed:
                // An ended item holds no slot and waits in no queue of the scheduler.
                if scheduler.holds(id) {
                    throw SimulationError("item \(id) ended (\(machine.phase.label)) and the scheduler still holds it"
                                          + (scheduler.isRunning(id) ? " as running: its slot is lost" : ""))
                }
                ok = true
            }
            if !ok { throw SimulationError("item \(id) in phase \(machine.phase.label) has no exit") }
        }
        try checkTransferBook()
        for outage in scheduler.hostOutages where scheduler.itemCount(ofHost: outage.hostKey) == 0 {
            throw SimulationError("host \(outage.hostKey) is held unreachable with no item that needs it")
        }
        for id in spaceQueue.waiting {
            let phase = machines[id]?.phase
            if phase != .waitingForSpace && phase != .waitingToPublish {
                throw SimulationError("item \(id) is in the space queue in phase \(phase?.label ?? "gone")")
            }
        }
        for (name, group) in groups.sorted(by: { $0.key < $1.key }) {
            let notEnded = world.request(name).items.filter { !(machines[$0]?.phase.hasEnded ?? true) }.count
            switch group.phase {
            case .open(let n):
                if n <= 0 { throw SimulationError("request \(name) has a group record with no open item") }
                if Int(n) != notEnded { throw SimulationError("request \(name) counts \(n) open items; \(notEnded) have not ended") }
            case .waitingToRetry:
                if groupRetries[name] == nil { throw SimulationError("request \(name)'s group end waits with no retry timed") }
            case .ending, .ended, .abandoned:
                throw SimulationError("request \(name)'s group is \(group.phase) after a step")
            }
        }
    }

    func describeOpen() -> String {
        machines.filter { !$0.value.phase.hasEnded }.sorted { $0.key < $1.key }
            .map { "\($0.key):\($0.value.phase.label)" }.joined(separator: " ")
    }
}

struct SimulationError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

struct SimPart: Hashable { let item: Int }
/// A publish job: its item, and the final name its data already has when only its marker is
/// left to write (a recovery's marker-only job, or one whose marker failed after the data's rename).
struct SimJob: Hashable {
    let item: Int
    var alreadyPublishedAs: String? = nil
}
/// The simulator's record of a published file (the machine's `Receipt`): the item it names.
struct SimReceipt: Hashable { let item: Int }

/// SplitMix64: a fixed sequence per seed, so a seed replays its trace exactly.
struct SimRandom {
    let seed: UInt64
    private var state: UInt64

    init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
    mutating func chance(_ p: Double) -> Bool { unit() < p }
    mutating func unit() -> Double { Double(next() >> 11) / Double(UInt64(1) << 53) }
}

extension SimRandom {
    // Names the daemon uses through `world.random` (a computed property: a mutating call on it
    // reads, draws and writes back).
    mutating func chanceMut(_ p: Double) -> Bool { chance(p) }
    mutating func unitMut() -> Double { unit() }
    mutating func belowMut(_ n: Int) -> Int { below(n) }
}
