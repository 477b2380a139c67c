import Foundation
import XCTest

/// Runs the simulation (`Simulation`) over a fixed set of seeds in `make test`, and over as many
/// as `SPOOLFETCH_SIMULATION_SEEDS` says in `make simulate SEEDS=N`.
final class SimulationTests: XCTestCase {
    /// Seeds that once failed (each is replayed first, forever): each catches one fix reverted —
    /// 1: a host's outage record outliving its last (cancelled) item; 7: a publish that can never
    /// fit waiting for space for ever; 22: cancel refused while a batch held the item's job.
    /// The first seed of 1,000 that finds each fix of issues 48 and 49 reverted (Benchmarks/
    /// RESULTS.md, "issue 48: the simulator against reverted fixes"): 1: `retry R` then
    /// `retry 'R#i'` publishing twice, a body larger than its filesystem waiting for ever, the
    /// outage record; 4: a publish on a full final folder tried every 5 s (a journal a try), a
    /// failed group end with no retry timed; 12: `deadline:` ignored; 18: ENOSPC on a body staging
    /// can never hold waiting for ever; 35: cancel refused while publishing; 38: a publish that can
    /// never fit waiting for ever; 60: a retry losing `on-exists: replace`; 295: cancel refused
    /// while waiting for space to publish; 1 and 3: `run --due` exiting 0, not 75, with items left
    /// for an unreachable host (1) or for space (3).
    /// The first seed that finds each shell fix of issue 60's table reverted in the executors the
    /// simulator now shares with the daemon (Benchmarks/RESULTS.md, "issue 60: reverted shell
    /// fixes"): 561, a cancel's withdrawn publish never answered; 4, a failed group end never
    /// timed again; 5, a withdrawal answered while a batch held the job; 1, events nested.
    /// The publish queue the simulator now shares with the daemon (`PublishQueue`), each rule
    /// broken in turn: 5, a cancel taking back a job a batch holds; 90, a second batch while one
    /// is in flight; 561, a dropped job's retry left behind.
    /// The journal keeper the simulator now shares with the daemon (`JournalKeeper`): 373, a
    /// batch's journal removed when the first request it mentions ends (an item of another
    /// request, published by it, fetched again after a crash).
    /// A journal-named file removed as unverified (`B.voided`): 65, the first of 1,000 seeds that
    /// finds the record not written (the item ends published with no file); 286 found the gap;
    /// 807, the voided record not ranked below another journal's (an item fetched again).
    /// A batch's result mapped to its item's event by the daemon's `PublishEnding`, each rule
    /// reverted in turn (the first of 300 seeds, plain / `STORE=1`): 6 / 25, the unnamed part not
    /// named when its item waits for another try; 1 / 2, `alreadyPublishedAs` lost (also "published
    /// twice" without the direct check); 6 / 25, a part taken for gone because it was unnamed;
    /// 1 / 24, `neverFits` not asked on a full final folder (waiting for space for ever).
    static let regressionSeeds: [UInt64] = [1, 7, 22, 3, 4, 12, 18, 35, 38, 60, 90, 295, 561, 373, 65, 286, 807, 6]

    /// How many seeds `make test` runs: enough to walk every path many times in seconds.
    static let fixedSeedCount: UInt64 = 300
    /// How many seeds `make test` runs with the content store on (`testSeedsWithTheContentStore`).
    static let storeSeedCount: UInt64 = 200
    /// Store seeds that once failed, run besides: 258 and 464, an adopted item's failed ingest
    /// ending another item's fetch (a duplicate fetch); 1,347, a cancel withdrawing a publish after
    /// the drain let its watcher go (allowed; the check was too strict); once the simulator drove
    /// the daemon's own `StoreExecutor`: 96, a waiter whose hit failed parked for ever when it had
    /// to wait again; 978, a fetch started again under its own claim not renewing it (broken as stale).
    static let storeRegressionSeeds: [UInt64] = [258, 464, 1347, 96, 978]

    /// The regression seeds, then `fixedSeedCount` seeds from 1 — or, under `make simulate
    /// SEEDS=N [FIRST=F]`, N seeds from F (`SPOOLFETCH_SIMULATION_SEEDS`, `_FIRST`).
    /// `make simulate SEED=N` (`SPOOLFETCH_SIMULATION_SEED`): that one seed, its whole trace printed.
    /// `STORE=1` (`SPOOLFETCH_SIMULATION_STORE`): each with the content store on.
    func testSeedsKeepEveryInvariant() throws {
        let environment = ProcessInfo.processInfo.environment
        let store = environment["SPOOLFETCH_SIMULATION_STORE"] == "1"
        let settings = Simulation.Settings(contentStore: store, drainWatch: store)
        if let one = environment["SPOOLFETCH_SIMULATION_SEED"].flatMap({ UInt64($0) }) {
            let simulation = Simulation(seed: one, settings: settings)
            defer { print(simulation.trace.joined(separator: "\n")) }
            try simulation.run()
            return
        }
        let count = environment["SPOOLFETCH_SIMULATION_SEEDS"].flatMap { UInt64($0) } ?? Self.fixedSeedCount
        let first = environment["SPOOLFETCH_SIMULATION_FIRST"].flatMap { UInt64($0) } ?? 1
        if environment["SPOOLFETCH_SIMULATION_SURVEY"] == "1" {
            try survey(Array(first ..< first + count), settings: settings)
            return
        }
        for seed in (settings.contentStore ? [] : Self.regressionSeeds) + Array(first ..< first + count) {
            do { try Simulation(seed: seed, settings: settings).run() } catch {
                XCTFail("\(error)")
                return
            }
        }
    }

    /// `make simulate SEEDS=N SURVEY=1`: every one of the N seeds, not stopping at a failure (the
    /// regression seeds left out), then one line: how many failed, the first and its failure —
    /// how a reverted fix is shown to be found (Benchmarks/RESULTS.md, issue 48).
    private func survey(_ seeds: [UInt64], settings: Simulation.Settings) throws {
        var failed: [(UInt64, String)] = []
        for seed in seeds {
            do { try Simulation(seed: seed, settings: settings).run() } catch let failure as Simulation.SimulationFailure {
                failed.append((seed, failure.what))
            }
        }
        let summary = failed.first.map { "first failing seed \($0.0): \($0.1)" } ?? "no seed failed"
        print("simulation survey: \(failed.count) of \(seeds.count) seeds failed; \(summary)")
        for (seed, what) in failed.prefix(20) { print("  seed \(seed): \(what.prefix(200))") }
        XCTAssertTrue(failed.isEmpty, "\(failed.count) of \(seeds.count) seeds failed; \(summary)")
    }

    /// The content store on (`--store`): `storeSeedCount` seeds keep every invariant (those of the
    /// store among them), and between them they walk its paths: hits, waits on this worker and on
    /// the other, a waiter taking over a given-up fetch, a dead worker's claim broken.
    func testSeedsWithTheContentStore() throws {
        var text = ""
        var hits = 0
        for seed in Self.storeRegressionSeeds + Array(UInt64(1) ... Self.storeSeedCount) {
            let s = Simulation(seed: seed, settings: Simulation.Settings(contentStore: true, drainWatch: true))
            do { try s.run() } catch {
                XCTFail("\(error)")
                return
            }
            text += s.trace.joined(separator: "\n")
            hits += s.store!.hits
        }
        XCTAssertGreaterThan(hits, 100)
        let waits = text.split(separator: "\n").filter { $0.contains(": waits for d") }
        XCTAssertTrue(waits.contains { $0.contains(" on w") }, "no store seed waited for another worker's fetch")
        XCTAssertTrue(waits.contains { !$0.contains(" on w") }, "no store seed waited for its own worker's fetch")
        for path in ["published from the store", "put into the store", "waits for d",
                     "ended without the body; the next waiter fetches", "queues for a connection to fetch",
                     "breaks the stale claim", "could not put", "fail(sha256-mismatch)",
                     "drain lets its watcher go", "drain watcher stop not delivered", "drain goes on after the watcher stopped"] {
            XCTAssertTrue(text.contains(path), "no store seed walked \(path)")
        }
    }

    func testTheSameSeedGivesTheSameTrace() throws {
        let a = Simulation(seed: 42), b = Simulation(seed: 42)
        try a.run()
        try b.run()
        XCTAssertEqual(a.trace, b.trace)
        XCTAssertGreaterThan(a.trace.count, 100)
        XCTAssertNotEqual(a.trace, try { let c = Simulation(seed: 43); try c.run(); return c.trace }())
    }

    /// The simulation really walks the paths: over the fixed seeds, requests end both ways, items
    /// are published, and kills, cancels and full disks happen.
    func testTheSeedsWalkThePathsOperatorsWalk() throws {
        var text = ""
        var done = 0, failed = 0
        for seed in UInt64(1) ... 150 {
            let s = Simulation(seed: seed)
            try s.run()
            text += s.trace.joined(separator: "\n")
            done += s.requests.values.filter { $0.folder == .done }.count
            failed += s.requests.values.filter { $0.folder == .failed }.count
        }
        XCTAssertGreaterThan(done, 20)
        XCTAssertGreaterThan(failed, 20)
        for path in ["kill -9", "cancel", "pause", "retry", "publishFailed(ENOSPC", "waiting-space", "fail(disk-full)",
                     "fail(deadline)", "outage", "hostUnreachable", "withdrawPublish", "fail(cancelled)", "refreshURL",
                     "queued by the retry of", "(ended in failed/): not queued again", "on-exists: replace",
                     // A batch's result as `PublishEnding` maps it (Simulation+Publish.swift).
                     "its marker failed", "removed staging/", "could not be named in staging"] {
            XCTAssertTrue(text.contains(path), "no seed walked \(path)")
        }
    }
}
