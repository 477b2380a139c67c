import Foundation
import SpoolCore
@testable import SpoolClient
import SpoolRequest
import SpoolStore

// The operator's paths across a request's end, and the promises they must keep (issue 48's
// defects: `retry R` then `retry 'R#0'` published twice; a retry of an `on-exists: replace`
// request published beside the old file; a publish on a full final folder tried again every
// 5 s, a batch journal a try; a `deadline:` that must end what it bounds; and `run --due`'s
// exit 75 for items left for an unreachable host or for space).
//
// `spoolfetch retry` of a request that has ended in `failed/` is not the daemon's decision but
// the client's (`ControlClient.retryFailed`): the simulation runs that real code on a real
// folder holding the failed request as the daemon filed it (`failed/R`, `failed/R.error`), and
// takes what it queues in `incoming/` as a new request, parsed by the real `RequestParser`.
// The folder is on /dev/shm where it exists (its fsyncs cost nothing) and goes with the run.

/// What the operator paths need to remember beyond the world's items: each request's text as
/// its producer wrote it, each item's final name and `on-exists`, which item of a first request
/// a retried item re-runs, and the final folder's names.
final class SimOperatorSpool {
    let root: String
    private var made = false
    /// Each request's text, as dropped (or as the retry queued it).
    var texts: [String: String] = [:]
    /// The item of the request as first written that an item re-runs (itself when not a retry).
    var origin: [Int: Int] = [:]
    var names: [Int: String] = [:]
    var onExists: [Int: OnExists] = [:]
    /// `on-exists` of each first item as its producer wrote it: what every retry must keep.
    var asWritten: [Int: OnExists] = [:]
    /// Names in the final folder now (a consumer taking files away empties it).
    var finalNames: Set<String> = []
    /// Items published, by the first item they re-run.
    var publishedByOrigin: [Int: [Int]] = [:]
    /// Items whose publish hit a full final folder: the world's count of frees and kills then.
    var fullAt: [Int: (freed: Int, kills: Int)] = [:]
    var retries = 0
    var violation: String?

    init(seed: UInt64) {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        root = base + "/spoolfetch-sim-\(getpid())-\(seed)-\(UInt64.random(in: 0 ... .max))"
    }

    deinit { if made { try? FileManager.default.removeItem(atPath: root) } }

    /// The spool folder, made at the first retry (with the layout's folders).
    func spool() throws -> SpoolLayout {
        if !made {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            made = true
        }
        return try SpoolLayout(root: root)
    }
}

extension Simulation {
    // MARK: Requests as written

    /// The request file `name` as its producer wrote it: sometimes `on-exists: replace`, and
    /// names that now and then repeat earlier requests' (drawn apart from the seed's main stream).
    func writeRequestText(_ name: String, items ids: [Int]) {
        let ops = operatorSpool
        let replace = sideChance(0.3, "on-exists \(name)")
        var lines = ["# simulated request \(name)"]
        if replace { lines.append("on-exists: replace") }
        for id in ids {
            let spec = spec(id)
            let shared = (0 ..< 3).first { sideChance(0.15, "name \(id) \($0)") }
            let fileName = shared.map { "keep\($0).bin" } ?? "f\(id).bin"
            lines.append("url: http://\(spec.host)/\(id)")
            lines.append("name: \(fileName)")
            if spec.announced { lines.append("expected-bytes: \(spec.bytes)") }
            ops.origin[id] = id
            ops.names[id] = fileName
            ops.onExists[id] = replace ? .replace : .keepBoth
            ops.asWritten[id] = replace ? .replace : .keepBoth
        }
        ops.texts[name] = lines.joined(separator: "\n") + "\n"
        let names = ids.compactMap { ops.names[$0] }
        if replace || names.contains(where: { $0.hasPrefix("keep") }) {
            log("request \(name) as written: \(replace ? "on-exists: replace, " : "")names \(names)")
        }
    }

    // MARK: retry of a request that has ended in failed/

    /// `spoolfetch retry R` or `retry 'R#i'` (drawn apart from the main stream), `times` times,
    /// for item `id` of a request filed in `failed/`: the real client's retry, on the request as
    /// the daemon filed it; what it queues is claimed as a new request.
    func retryEnded(item id: Int, times: Int) {
        let ops = operatorSpool
        let spec = spec(id)
        let name = spec.request
        for n in 0 ..< times {
            let whole = sideChance(0.5, "retry form \(name) \(id) \(ops.retries) \(n)")
            let target = whole ? name : "\(name)#\(spec.index)"
            do {
                let layout = try ops.spool()
                try fileFailed(name, in: layout)
                let result = try ControlClient.retryFailed(request: name, id: target, spool: ops.root)
                log("operator: retry \(target) (ended in failed/): \(result.items.isEmpty ? "not queued again" : "queued \(result.items)")")
                for file in layout.incoming.list().sorted() { try claimRetry(file, of: name, layout: layout) }
            } catch {
                log("operator: retry \(target) (ended in failed/) refused: \(error)")
            }
        }
    }

    /// `failed/R` and `failed/R.error`, as the daemon files a failed request (once).
    private func fileFailed(_ name: String, in layout: SpoolLayout) throws {
        guard !layout.failed.exists(name) else { return }
        let failures: [ItemFailure] = request(name).items.compactMap { id in
            guard case .failed(let failed) = disk(id) else { return nil }
            let spec = spec(id)
            return ItemFailure(index: spec.index, url: "http://\(spec.host)/\(id)", name: operatorSpool.names[id] ?? "f\(id).bin",
                               code: failed.code, message: failed.message, attempts: failed.attempts)
        }
        let record = ErrorRecord(request: name, code: "items-failed", message: "\(failures.count) item(s) failed", items: failures)
        try layout.failed.writeAtomically(name, Array((operatorSpool.texts[name] ?? "").utf8), sync: false)
        try layout.failed.writeAtomically(name + ".error", Array(try JSONEncoder().encode(record)), sync: false)
    }

    /// The intake takes the retry's file from `incoming/`: a new request, its items those the
    /// file names (each URL's path names the first item it re-runs).
    private func claimRetry(_ file: String, of failed: String, layout: SpoolLayout) throws {
        let bytes = try layout.incoming.read(file)
        layout.incoming.remove(file)
        let parsed = try RequestParser.parse(fileName: file, bytes: bytes)
        let ops = operatorSpool
        ops.retries += 1
        let name = "\(failed)-retry\(ops.retries)"
        var specs: [(first: Int, spec: (index: Int, announced: Bool))] = []
        for item in parsed.items {
            guard let first = Int(item.url.string.split(separator: "/").last ?? "") else {
                throw SimulationError("the retry's URL \(item.url.string) names no item")
            }
            specs.append((first, (item.index, item.expectedBytes != nil)))
        }
        // Its text first: the claiming worker parses it (`SimDaemon.parsedItems`).
        ops.texts[name] = String(decoding: bytes, as: UTF8.self)
        let ids = addRetryRequest(name, items: specs.map { (spec($0.first), $0.spec.index, $0.spec.announced) },
                                  worker: sideChance(0.5, "retry owner \(name)") ? 1 : 0)
        for (n, id) in ids.enumerated() {
            let item = parsed.items[n]
            ops.origin[id] = specs[n].first
            ops.names[id] = item.name
            ops.onExists[id] = item.onExists
        }
        log("request \(name) queued by the retry of \(failed): items \(ids) re-run \(specs.map(\.first))")
    }

    // MARK: The final folder's names

    /// Item `id` is published: under its name, replacing a file of that name when its request
    /// says `on-exists: replace`, else beside it (`-N`). A first item written with `replace`
    /// that lands beside the old file, or a first item published twice, breaks the contract.
    func placePublished(_ id: Int) {
        let ops = operatorSpool
        let first = ops.origin[id] ?? id
        let name = ops.names[id] ?? "f\(id).bin"
        var placed = name
        if ops.finalNames.contains(name) && ops.onExists[id] != .replace {
            let stem = name.split(separator: ".", maxSplits: 1).first.map(String.init) ?? name
            let suffix = name.dropFirst(stem.count)
            var n = 1
            while ops.finalNames.contains("\(stem)-\(n)\(suffix)") { n += 1 }
            placed = "\(stem)-\(n)\(suffix)"
            if ops.asWritten[first] == .replace {
                ops.violation = ops.violation ?? "item \(id) (re-running item \(first), whose request says on-exists: replace) "
                    + "was published as \(placed) beside the old \(name)"
            }
        }
        ops.finalNames.insert(placed)
        ops.publishedByOrigin[first, default: []].append(id)
        if let all = ops.publishedByOrigin[first], all.count > 1 {
            ops.violation = ops.violation ?? "item \(first) of request \(spec(first).request) was published \(all.count) times (items \(all))"
        }
        ops.fullAt.removeValue(forKey: id)
    }

    /// A publish of `id` hit a full final folder. Tried again with nothing freed there since its
    /// last ENOSPC (by the same daemon, no operator `retry` between) is a loop with no reason,
    /// a batch journal a try: a publish short of space waits for space instead.
    func publishHitFullDisk(_ id: Int, freed: Int, kills: Int) {
        let ops = operatorSpool
        if let last = ops.fullAt[id], last.freed == freed, last.kills == kills {
            ops.violation = ops.violation ?? "item \(id)'s publish was tried again on the full final folder with nothing freed "
                + "since its last ENOSPC (\(finalFree) bytes free): a loop, a batch journal a try"
        }
        ops.fullAt[id] = (freed, kills)
    }

    /// The operator's `retry` of an item asks for a publish try at once, space or not.
    func operatorRetried(_ id: Int) { operatorSpool.fullAt.removeValue(forKey: id) }

    // MARK: run --due

    /// Were each worker a due drain (`run --due`) looking now, as `Drain.dueDrainIsDone` does with
    /// the core's `DueDrainTally`: once it says done, an item it leaves queued for a host held
    /// unreachable, or waiting for space, must make the run exit 75 (`EX_TEMPFAIL`, the shell's
    /// rule: items left for hosts or space), so cron's caller knows to try again; and no item may
    /// be under way. Looks only; changes nothing.
    func checkDueDrains() -> String? {
        for worker in workersForChecks {
            let unreachable = Set(worker.scheduler.hostOutages.map(\.hostKey))
            var tally = DueDrainTally(now: now, unreachable: unreachable, windowOpen: true)
            var done = true
            for (id, machine) in worker.machines.sorted(by: { $0.key < $1.key }) {
                let host = spec(id).host
                if !tally.count(machine.phase, earliestStart: nil, discretionary: false, hostKey: { host }) { done = false; break }
            }
            guard done else { continue }
            let exit = tally.forHosts > 0 || tally.forSpace > 0 ? 75 : 0
            for (id, machine) in worker.machines.sorted(by: { $0.key < $1.key }) {
                let phase = machine.phase
                if phase == .running || phase == .retrying || phase == .publishing {
                    return "\(worker.name): a due drain would exit with item \(id) \(phase.label)"
                }
                let forHost = phase == .queued && unreachable.contains(spec(id).host)
                let forSpace = phase == .waitingForSpace || phase == .waitingToPublish
                if (forHost || forSpace) && exit != 75 {
                    return "\(worker.name): a due drain leaves item \(id) \(forHost ? "for unreachable host \(spec(id).host)" : "waiting for space") "
                        + "and would exit \(exit), not 75"
                }
            }
        }
        return nil
    }

    // MARK: Invariants

    /// The operator paths' promises, and every `deadline:`: a request whose deadline passed more
    /// than a second ago (a batch holding a publish reports within it) has all its items ended.
    func checkOperatorPaths() throws -> String? {
        if let violation = operatorSpool.violation { return violation }
        if let violation = checkDueDrains() { return violation }
        for name in requests.keys.sorted() {
            let request = request(name)
            // A request filed in rejected/ has no item the deadline could end.
            guard let deadline = request.deadline, now.timeIntervalSince(deadline) > 1, request.folder != .rejected else { continue }
            let open = request.items.filter { id in
                switch disk(id) { case .published, .failed: return false; default: return true }
            }
            if !open.isEmpty {
                return "request \(name)'s deadline passed \(Int(now.timeIntervalSince(deadline))) s ago, yet items \(open) have not ended"
            }
        }
        return nil
    }
}
