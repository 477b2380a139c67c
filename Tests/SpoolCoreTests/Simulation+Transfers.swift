import Foundation
import SpoolCore
import SpoolScheduler

// The simulated transfers under the daemon's own `TransferBook`: a simulated server answers each
// request (a resume's `Range` with `If-Range`, a resource replaced meanwhile, a server that
// ignores `If-Range`, error pages with validators of their own, cuts, a full staging disk, 416s,
// paced refusals), and what it answered goes to the book as the transfer layer's facts. What
// the part keeps, the end the machine is told, the host's answers and the resume states are
// the book's: here is none of its rules, only the world's truth the invariants check it against
// (which version a part's bytes are of).

/// An item's part as a simulated worker keeps it: the book's record.
final class SimTransferItem {
    let id: Int
    /// Bytes in order, and the version of the resource they are of (the world's truth: the book
    /// sees only validators).
    var bytes: Int64 = 0
    var version: Int?
    /// The part's validators, as the book's steps set them.
    var etag: String?
    var lastModified: String?
    var keptRanges: [[Int64]]?
    var hasStateFile = false
    var named = false
    /// This attempt's request: where its range begins, and its `If-Range`.
    var resumeFrom: Int64 = 0
    var ifRange: String?
    /// The size of the body whose response began in this attempt (0: none began).
    var bodyTotal: Int64 = 0
    /// Its host's answers in this attempt, and those at its end.
    var answers = 0
    var endAnswers = 0
    /// Its host paces it and said its refusal at the end costs no attempt (the scheduler's word).
    var freeRefusal = false
    /// A stopped segmented body's ranges past the prefix, on disk (the world's truth): the next
    /// start must fetch only what is missing of them.
    var rangesOnDisk: [[Int64]]?

    init(id: Int) { self.id = id }

    /// A start: a part without a validator to resume with starts from byte 0; kept ranges go
    /// into the transfer (as `TransferDriver.start`).
    func begin() -> String? {
        var broken: String? = nil
        if let onDisk = rangesOnDisk, keptRanges != onDisk {
            broken = "item \(id): its part holds the ranges \(onDisk) of a stopped segmented body; its start takes \(keptRanges.map { "\($0)" } ?? "none")"
        }
        rangesOnDisk = nil
        if bytes > 0 && etag == nil && lastModified == nil { bytes = 0; version = nil }
        resumeFrom = bytes
        ifRange = bytes > 0 ? etag : nil
        keptRanges = nil
        answers = 0
        endAnswers = 0
        freeRefusal = false
        bodyTotal = 0
        return broken
    }

    func discard() { bytes = 0; version = nil; etag = nil; lastModified = nil; keptRanges = nil; rangesOnDisk = nil }
}

/// The running hash of a simulated part: which version's bytes, how many.
struct SimHash: Hashable { let id: Int; let version: Int?; let bytes: Int64 }
/// The response's facts the simulated host reads.
struct SimFacts { var status: Int; var retryAfter: Double? }

/// A simulated worker's ports for the book: its parts, the simulated staging filesystem's space
/// rules (the core's `SpaceRules`), and its scheduler for the hosts' answers.
final class SimTransferPorts: TransferBookPorts {
    typealias Record = SimTransferItem
    typealias Facts = SimFacts
    typealias Hash = SimHash

    unowned let daemon: SimDaemon
    init(daemon: SimDaemon) { self.daemon = daemon }
    private var world: Simulation { daemon.world }

    func keep(_ item: SimTransferItem, _ step: PartKeep, hash: SimHash?) {
        item.bytes = step.bytes
        item.version = step.bytes > 0 ? hash?.version : nil
        if step.adoptsValidators { item.etag = step.etag; item.lastModified = step.lastModified }
        if let ranges = step.ranges { item.keptRanges = ranges }
    }

    func held(_ item: SimTransferItem) -> PartHeld {
        let spec = world.spec(item.id)
        return PartHeld(validator: item.etag ?? item.lastModified, wantedSHA256: spec.digest,
                        expectedBytes: spec.announced ? spec.bytes : nil, hasStateFile: item.hasStateFile, partNamed: item.named)
    }

    /// A whole version's digest (the one a request's `sha256:` names for version 0), else one
    /// that names what the bytes are: the publish invariant refuses those.
    func tooLargeHint(_ item: SimTransferItem) -> String? { nil }

    func digest(_ hash: SimHash) -> String {
        guard let v = hash.version, hash.bytes == world.size(hash.id, v) else {
            return "partial-\(hash.id)-v\(hash.version ?? -1)-\(hash.bytes)"
        }
        return world.wholeDigest(hash.id, v)
    }

    /// The simulator asks no conditional fetch.
    func unchanged(_ item: SimTransferItem) -> UnchangedFile? { nil }

    func neverFits(body: Int64?) -> String? { body.flatMap { SpaceRules.never(bytes: $0, on: world.stagingSpace) } }

    func announce(_ item: SimTransferItem, bytes: Int64) {}

    /// The simulated store has no hashed mirrors.
    func fallsThrough(_ item: SimTransferItem, _ end: TransferEnd) -> Bool { false }

    func hostAnswered(_ item: SimTransferItem, _ facts: SimFacts, ended: Bool) -> Bool {
        item.answers += 1
        let host = world.spec(item.id).host
        _ = daemon.scheduler.hostReachable(host)
        guard ended else { return false }
        item.endAnswers += 1
        if facts.status == 429 || facts.status == 503 {
            item.freeRefusal = daemon.scheduler.hostRefused(host, now: world.now, retryAfter: facts.retryAfter)
            return item.freeRefusal
        }
        if facts.status >= 200 && facts.status < 400 { daemon.scheduler.hostAnsweredRequest(host, now: world.now) }
        return false
    }

    func bodyBegan(_ item: SimTransferItem, etag: String?, lastModified: String?, restartedFromZero: Bool) {
        if restartedFromZero { item.bytes = 0 }
        item.etag = etag
        item.lastModified = lastModified
    }

    func nameForResume(_ item: SimTransferItem) -> Bool { item.named = true; return true }

    func writeResumeState(_ item: SimTransferItem, bytes: Int64, synced: Int64) {
        if item.etag == nil && item.lastModified == nil { daemon.violation = "item \(item.id): a resume state without a validator" }
        if item.bodyTotal < TransferBook<SimTransferPorts>.resumeStateThreshold {
            daemon.violation = "item \(item.id): a resume state for a body under the threshold"
        }
        item.hasStateFile = true
    }
}

extension SimDaemon {
    typealias Report = TransferReport<SimFacts, SimHash>

    /// The server's answer to the item's request, and the transfer layer's report of it to the
    /// book; then the world's truth checked against what the book made of it.
    func transferEnds(_ id: Int) {
        guard let item = book.running[id] else { return }
        let spec = world.spec(id)
        var side = world.sideRandom("transfer \(id) \(world.trace.count)")
        if world.isDown(spec.host) {
            end(item, Report(key: id, fault: TransferFault(code: "connect", description: "connection refused", isTransient: true),
                             status: 0, bytesInOrder: item.bytes, hash: hash(item), outage: true, facts: SimFacts(status: 0)))
            return
        }
        // The resource replaced meanwhile (not one a request names by `sha256:`).
        if world.faultsOn, spec.digest == nil, side.chance(0.05) { world.replace(id) }
        let v = world.version(id), size = world.size(id, v), etag = world.etag(id, v)
        let ignoresIfRange = world.sideChance(0.3, "ignores If-Range \(id)")
        var status = 200
        var start: Int64 = 0
        if item.resumeFrom > 0, item.ifRange == etag || ignoresIfRange {
            status = item.resumeFrom >= size ? 416 : 206
            start = item.resumeFrom
        }
        let changed = item.resumeFrom > 0 && item.ifRange != etag
        let facts = SimFacts(status: status)
        if status == 416 {
            // No body: the server's total, of its version.
            let whole = !changed && item.bytes == size && item.version == v
            let fault = TransferFault(code: "http-status", description: "HTTP status 416", httpStatus: 416)
            end(item, Report(key: id, fault: fault, status: 416, bytesInOrder: item.bytes, hash: hash(item), etag: etag,
                             rangeTotal: size, facts: facts))
            if whole, let phase = machines[id]?.phase, phase != .publishing && !phase.hasEnded {
                violation = "item \(id): a 416 on a part holding the whole version was not published (\(phase.label))"
            }
            return
        }
        if status == 206 && changed {
            // A server ignoring If-Range answered a range of another version: the transfer layer
            // stops at its headers (`validatorContradicting`), nothing written.
            end(item, Report(key: id, fault: TransferFault(code: "resource-changed", description: "the resource changed",
                                                           isTransient: true, discardsPartial: true),
                             status: 206, bytesInOrder: item.bytes, hash: hash(item), etag: etag, facts: facts))
            return
        }
        if noRoom.remove(id) != nil {
            // The body's first byte finds no room: the gate's cut (never or later) or a write's ENOSPC.
            let gate: NoRoom? = side.chance(0.5) ? (SpaceRules.never(bytes: size, on: world.stagingSpace).map(NoRoom.never) ?? .later) : nil
            let never: Bool = { if case .never? = gate { return true } else { return false } }()
            let fault = TransferFault(code: "disk-full", description: "ENOSPC in staging", isTransient: !never, diskFull: true)
            let r = Report(key: id, fault: fault, status: status, bytesInOrder: item.bytes, hash: hash(item), etag: etag,
                           rangeTotal: status == 206 ? size : nil, contentLength: size - start, noRoom: gate, facts: facts)
            end(item, r)
            if SpaceRules.never(bytes: size, on: world.stagingSpace) != nil, let phase = machines[id]?.phase, !phase.hasEnded {
                violation = "item \(id): a body staging can never hold hit a full disk and did not fail at once (\(phase.label))"
            }
            return
        }
        var digest = world.wholeDigest(id, v)
        guard world.faultsOn else {
            bodyBegins(item, etag: etag, status: status, start: start, size: size, endsWhole: true)
            end(item, Report(key: id, fault: nil, status: status, sha256: digest, bytesInOrder: size, hash: SimHash(id: id, version: v, bytes: size),
                             etag: etag, facts: facts))
            return
        }
        // A body of another digest than the request's `sha256:` (drawn aside: only store seeds have one).
        if spec.digest != nil, world.sideChance(0.05, "body \(id) \(world.trace.count)") { digest = "other-\(id)" }
        var fault: TransferFault?
        var retryAfter: Double? = nil
        var errorStatus: Int? = nil
        switch world.random.belowMut(20) {
        case 0: fault = TransferFault(code: "http-status", description: "HTTP status 500", httpStatus: 500, isTransient: true); errorStatus = 500
        case 1: fault = TransferFault(code: "http-status", description: "HTTP status 404", httpStatus: 404, movesToNextSource: true); errorStatus = 404
        case 2:
            let s = side.chance(0.5) ? 429 : 503
            fault = TransferFault(code: "http-status", description: "HTTP status \(s)", httpStatus: s, isTransient: true)
            retryAfter = Double(world.random.belowMut(30))
            errorStatus = s
        case 3: fault = TransferFault(code: "transfer", description: "connection cut", isTransient: true)
        case 4: fault = TransferFault(code: "disk-full", description: "ENOSPC", isTransient: true, diskFull: true)
        case 5:
            // The transfer layer found the resource changed under the body (a range of another version).
            if spec.digest == nil { world.replace(id) }
            fault = TransferFault(code: "resource-changed", description: "the resource changed", isTransient: true, discardsPartial: true)
        case 6: fault = TransferFault(code: "http-status", description: "HTTP status 410", httpStatus: 410); errorStatus = 410
        default: fault = nil
        }
        let wrote = world.random.chanceMut(0.5)
        if let errorStatus {
            // An error page: no body into the part, validators of its own now and then.
            let page = side.chance(0.5) ? "\"page-\(errorStatus)\"" : nil
            end(item, Report(key: id, fault: fault, status: errorStatus, bytesInOrder: item.bytes, hash: hash(item), etag: page,
                             retryAfter: retryAfter, facts: SimFacts(status: errorStatus, retryAfter: retryAfter)))
            return
        }
        if let fault {
            // The body began and stopped: some of it (or all, the end unconfirmed) in the part.
            bodyBegins(item, etag: etag, status: status, start: start, size: size, endsWhole: false)
            var upTo = start
            if wrote && size > start {
                switch side.below(3) {
                case 0: upTo = size
                case 1: upTo = max(start, size / 2)
                default: upTo = start + Int64(side.below(Int(size - start)) + 1)
                }
            }
            var kept: [[Int64]]? = nil
            if wrote, size - upTo > 2 << 20, side.chance(0.3) {
                // A segmented body stopped: a range past the prefix stays in the part.
                let from = upTo + (size - upTo) / 2
                kept = [[from, from + (size - from) / 2, size]]
            }
            end(item, Report(key: id, fault: fault, status: status, bytesInOrder: upTo, hash: SimHash(id: id, version: v, bytes: upTo),
                             etag: etag, rangeTotal: status == 206 ? size : nil, contentLength: size - start, keptRanges: kept, partHasMore: kept == nil && wrote && side.chance(0.2),
                             facts: facts))
            return
        }
        bodyBegins(item, etag: etag, status: status, start: start, size: size, endsWhole: true)
        end(item, Report(key: id, fault: nil, status: status, sha256: digest, bytesInOrder: size, hash: SimHash(id: id, version: v, bytes: size),
                         etag: etag, rangeTotal: status == 206 ? size : nil, contentLength: size - start, facts: facts))
    }

    private func hash(_ item: SimTransferItem) -> SimHash { SimHash(id: item.id, version: item.version, bytes: item.bytes) }

    /// The response's body began (the session's body start, taken in the turn it ends).
    private func bodyBegins(_ item: SimTransferItem, etag: String, status: Int, start: Int64, size: Int64, endsWhole: Bool) {
        item.bodyTotal = size
        book.bodiesBegan([BodyStart(key: item.id, etag: etag, lastModified: nil, total: size, rangeStart: status == 206 ? start : nil,
                                    restartedFromZero: item.resumeFrom > 0 && status == 200, facts: SimFacts(status: status))],
                         endingWhole: endsWhole ? [item.id] : [])
    }

    /// The book decides the end; the machine is told; the part checked against the world.
    private func end(_ item: SimTransferItem, _ report: Report) {
        transfers.removeValue(forKey: item.id)
        let attempts = machines[item.id]?.attempts ?? 0
        guard let (_, end) = book.ended(report) else { return }
        if let kept = report.keptRanges, report.partOpen { item.rangesOnDisk = kept }
        let expected = end.outage || end.fault?.cancelled == true ? 0 : 1
        if item.endAnswers != expected {
            violation = "item \(item.id): its host answered \(item.endAnswers) times at the transfer's end (\(expected) expected)"
        }
        if end.fault == nil, item.answers != 1 {
            violation = "item \(item.id): its host answered \(item.answers) times for a body that began and ended whole in one turn"
        }
        send(.transferEnded(end), to: item.id)
        checkPart(item)
        // A paced host's refusal costs no attempt (while the item is within its resource timeout).
        if item.freeRefusal, let machine = machines[item.id], !machine.phase.hasEnded,
           world.now.timeIntervalSince(machine.firstQueued) < policy.resourceTimeout, machine.attempts != attempts - 1 {
            violation = "item \(item.id): a paced host's refusal cost an attempt (\(attempts) before, \(machine.attempts) after)"
        }
    }

    /// The book's running map holds exactly the transfers in flight.
    func checkTransferBook() throws {
        for key in book.running.keys.sorted() where transfers[key] == nil {
            throw SimulationError("item \(key) is in the transfer book's running map with no transfer in flight")
        }
        for key in transfers.keys.sorted() where book.running[key] == nil {
            throw SimulationError("item \(key)'s transfer is in flight and not in the transfer book's running map")
        }
    }

    /// The part's validators are those of the response its bytes came from.
    func checkPart(_ item: SimTransferItem) {
        guard item.bytes > 0, let v = item.version else { return }
        let etag = world.etag(item.id, v)
        if item.etag != etag {
            violation = "item \(item.id): its part holds \(item.bytes) bytes of version \(v) (\(etag)) under the validator \(item.etag ?? "none")"
        }
    }
}

extension Simulation {
    /// The resource's version now (0 until replaced), its size and strong ETag, and the digest of
    /// its whole body (the request's `sha256:` for version 0). Versions alternate between the
    /// item's size and half of it, so a part cut at half holds as many bytes as the next version.
    func version(_ id: Int) -> Int { versions[id] ?? 0 }
    func size(_ id: Int, _ v: Int) -> Int64 { v % 2 == 0 ? spec(id).bytes : max(1, spec(id).bytes / 2) }
    func etag(_ id: Int, _ v: Int) -> String { "\"r\(id)-v\(v)\"" }
    func wholeDigest(_ id: Int, _ v: Int) -> String { v == 0 ? (spec(id).digest ?? "sha-\(id)") : "sha-\(id)-v\(v)" }

    /// The resource at the item's URL is replaced by a new version.
    func replace(_ id: Int) {
        versions[id] = version(id) + 1
        log("item \(id)'s resource replaced (version \(version(id)), \(size(id, version(id))) bytes)")
    }
}
