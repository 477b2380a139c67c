import Foundation
@testable import SpoolCore
import XCTest

/// `StoreExecutor` built with fake ports and no daemon (the content store's shell rules, as
/// `GroupEndExecutorTests` does for group ends): row by row, a hit, a wait on this worker and on
/// another, the slot given back and asked for again, what ends a flight (only its own body's
/// ingest, its item giving up, the exit), a stale claim broken only if it is still that claim.
final class StoreExecutorTests: XCTestCase {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    struct Holder: StoreClaimHolding {
        var item: String
        var worker: String
        var isMine = false
        var isGone = false
        var isUnreadable = false
        var renewed = 0
    }

    /// Ports that write down every call; the world (items, entries, claims, the clock) is set by the test.
    final class FakePorts: StorePorts {
        typealias Key = Int
        typealias Credentials = String
        var digests: [Int: String] = [:]
        var running: Set<Int> = []
        var keeps: Set<Int> = []
        var entries: Set<String> = []
        var claims: [String: Holder] = [:]
        var parked: Set<Int> = []
        var calls: [String] = []
        var clock = StoreExecutorTests.t0
        var hitsBegin = true
        var claimFails = false
        /// An entry that arrives while the claim is taken (another worker's ingest ended just then).
        var arrivesOnClaim: String?

        func digest(of key: Int) -> String? { digests[key] }
        func name(of key: Int) -> String { "r#\(key)" }
        func isRunning(_ key: Int) -> Bool { running.contains(key) }
        func keepsFetch(_ key: Int) -> Bool { keeps.contains(key) || running.contains(key) }
        func entry(_ digest: String) -> StoreEntryLook { entries.contains(digest) ? .present : .absent }
        func claimHolder(_ digest: String) -> Holder? { claims[digest] }
        func claim(_ digest: String, by key: Int) -> StoreClaimAnswer<Holder> {
            if claimFails { return .failed(reason: "EACCES") }
            if let arrives = arrivesOnClaim { entries.insert(arrives) }
            if let holder = claims[digest] { return .heldBy(holder) }
            claims[digest] = Holder(item: name(of: key), worker: "here", isMine: true)
            calls.append("claim \(digest) \(key)")
            return .claimed
        }
        func breakClaim(_ digest: String, seen: Holder) -> Bool {
            guard claims[digest] == seen else { return false }
            claims[digest] = nil
            calls.append("break \(digest)")
            return true
        }
        func releaseClaim(_ digest: String) { claims[digest] = nil; calls.append("release \(digest)") }
        func refreshClaim(_ digest: String) { claims[digest]?.renewed += 1; calls.append("refresh \(digest)") }
        func fetch(_ key: Int, credentials: String) { calls.append("fetch \(key) \(credentials)") }
        func readHit(_ key: Int, digest: String, credentials: String) -> Bool {
            calls.append("hit \(key)")
            return hitsBegin && entries.contains(digest)
        }
        func park(_ key: Int) { parked.insert(key); calls.append("park \(key)") }
        func unpark(_ key: Int) { parked.remove(key); calls.append("unpark \(key)") }
        func isParked(_ key: Int) -> Bool { parked.contains(key) }
        func slotUnused(_ key: Int) { calls.append("slotUnused \(key)") }
        var now: Date { clock }
        var monotonic: Double { clock.timeIntervalSince1970 }
        func checkDue() {}
        func note(_ note: StoreNote<Int>) {
            if case .tookOverStaleClaim(let key, _, let holder) = note { calls.append("took over \(holder) for \(key)") }
        }
    }

    private func make(_ items: [Int: String]) -> (StoreExecutor<FakePorts>, FakePorts) {
        let ports = FakePorts()
        ports.digests = items
        ports.running = Set(items.keys)
        return (StoreExecutor(ports: ports, timing: .init(leasePeriod: 10, leaseTimeout: 30, checkInterval: 0.2)), ports)
    }

    private func advance(_ ports: FakePorts, _ seconds: Double) { ports.clock = ports.clock.addingTimeInterval(seconds) }

    // | entry in the store | → hit, no fetch, no slot given back; served: its body never goes into the store.
    func testAnEntryPresentIsAHitAndItsBodyIsNotIngested() {
        let (executor, ports) = make([1: "d"])
        ports.entries = ["d"]
        executor.startTransfer(1, credentials: "c")
        XCTAssertEqual(ports.calls, ["hit 1"])
        executor.hitServed(1)
        XCTAssertTrue(executor.servedFromStore(1))
        XCTAssertNil(executor.published(1, digest: "d"))
        executor.itemEnded(1)
        XCTAssertFalse(executor.servedFromStore(1))
    }

    // | no entry, no claim | → claimed fetch; | this worker fetches it | → wait for that item, slot given back.
    func testASecondItemOfTheDigestWaitsForThisWorkersFetchWithoutASlot() {
        let (executor, ports) = make([1: "d", 2: "d"])
        executor.startTransfer(1, credentials: "c1")
        executor.startTransfer(2, credentials: "c2")
        XCTAssertEqual(ports.calls, ["claim d 1", "fetch 1 c1", "park 2"])
        XCTAssertEqual(executor.flights["d"]?.key, 1)
        XCTAssertEqual(executor.waitDescription(2), "waiting for sha256:d… fetched by r#1")
        XCTAssertEqual(executor.nextCheck, ports.clock.addingTimeInterval(0.2))
        advance(ports, 0.2)
        XCTAssertEqual(executor.check(now: ports.clock), 0)
        XCTAssertTrue(executor.isWaiting(2))
    }

    /// a1ba466: another item's body of the digest (adopted, published meanwhile) does not end the
    /// fetch; the fetching item's own ingest does, and its claim goes; the waiter then hits.
    func testOnlyTheFetchingItemsOwnIngestEndsItsFlight() {
        let (executor, ports) = make([1: "d", 2: "d", 3: "d"])
        executor.startTransfer(1, credentials: "c1")
        executor.startTransfer(2, credentials: "c2")
        XCTAssertEqual(executor.published(3, digest: "d"), false)
        executor.ingested(digest: "d", flight: nil)
        XCTAssertEqual(executor.flights["d"]?.key, 1)
        XCTAssertNotNil(ports.claims["d"])
        XCTAssertEqual(executor.published(1, digest: "d"), true)
        ports.entries = ["d"]
        executor.ingested(digest: "d", flight: 1)
        XCTAssertNil(executor.flights["d"])
        XCTAssertNil(ports.claims["d"])
        XCTAssertEqual(executor.check(now: ports.clock), 1)
        XCTAssertEqual(ports.calls.suffix(2), ["release d", "hit 2"])
    }

    /// A fetch whose item gave up ends (claim released); the first waiter of the digest asks for
    /// a slot (it holds none), the second waits on; the slot granted, it fetches under a new claim.
    func testAGivenUpFetchPassesToTheFirstWaiterThroughASlot() {
        let (executor, ports) = make([1: "d", 2: "d", 3: "d"])
        for key in [1, 2, 3] { executor.startTransfer(key, credentials: "c\(key)") }
        ports.running.remove(1)
        advance(ports, 0.2)
        ports.calls = []
        XCTAssertEqual(executor.check(now: ports.clock), 1)
        XCTAssertEqual(ports.calls, ["release d", "unpark 2"])
        XCTAssertTrue(executor.awaitsSlot(2))
        XCTAssertTrue(executor.isWaiting(3))
        XCTAssertTrue(executor.slotGranted(2))
        XCTAssertEqual(ports.calls.suffix(2), ["claim d 2", "fetch 2 c2"])
        XCTAssertFalse(executor.slotGranted(4))
    }

    /// | another's claim, live | → wait elsewhere; unchanged for `leaseTimeout` → stale: broken and
    /// claimed once the waiter has a slot. A renewal in between makes it another claim (not stale).
    func testAClaimUnchangedForTheLeaseTimeoutIsBrokenAndARenewedOneIsNot() {
        let (executor, ports) = make([1: "d"])
        ports.claims["d"] = Holder(item: "s#0", worker: "w9")
        executor.startTransfer(1, credentials: "c")
        XCTAssertEqual(ports.calls, ["park 1"])
        XCTAssertEqual(executor.waitDescription(1), "waiting for sha256:d… fetched by s#0 on w9")
        advance(ports, 20)
        ports.claims["d"]?.renewed += 1
        XCTAssertEqual(executor.check(now: ports.clock), 0)
        advance(ports, 20)
        XCTAssertEqual(executor.check(now: ports.clock), 0, "renewed 20 s ago: live")
        advance(ports, 10)
        XCTAssertEqual(executor.check(now: ports.clock), 1)
        XCTAssertEqual(ports.calls.last, "unpark 1")
        XCTAssertTrue(executor.slotGranted(1))
        XCTAssertEqual(ports.calls.suffix(4), ["break d", "took over s#0 on w9 for 1", "claim d 1", "fetch 1 c"])
    }

    /// 445db68: a fetch that would break a stale claim judges the claim read just before: one
    /// renewed since is not broken, and the item waits for it.
    func testABreakJudgesTheClaimReadJustBefore() {
        let (executor, ports) = make([1: "d"])
        ports.claims["d"] = Holder(item: "s#0", worker: "w9")
        executor.startTransfer(1, credentials: "c")
        advance(ports, 31)
        ports.claims["d"]?.renewed += 1
        XCTAssertEqual(executor.beginFetch(1, digest: "d", breaking: true, credentials: "c"), .waiting)
        XCTAssertFalse(ports.calls.contains("break d"))
        ports.claims["d"] = Holder(item: "s#0", worker: "w9", isGone: true)
        XCTAssertEqual(executor.beginFetch(1, digest: "d", breaking: true, credentials: "c"), .fetch)
        XCTAssertEqual(ports.calls.suffix(3), ["break d", "took over s#0 on w9 for 1", "claim d 1"])
    }

    /// 3e4d45b: a waiter whose hit failed (a rotten entry) holds no slot: it queues for one
    /// before it fetches; an item that held its slot decides again at once.
    func testAWaiterWhoseHitFailedQueuesForASlot() {
        let (executor, ports) = make([1: "d", 2: "e"])
        ports.claims["d"] = Holder(item: "s#0", worker: "w9")
        executor.startTransfer(1, credentials: "c")
        ports.claims["d"] = nil
        ports.entries = ["d"]
        advance(ports, 0.2)
        XCTAssertEqual(executor.check(now: ports.clock), 1)
        XCTAssertEqual(ports.calls.last, "hit 1")
        ports.entries = []
        executor.hitFailed(1, credentials: "c")
        XCTAssertEqual(ports.calls.last, "unpark 1")
        XCTAssertTrue(executor.slotGranted(1))
        XCTAssertEqual(ports.calls.suffix(2), ["claim d 1", "fetch 1 c"])
        executor.hitFailed(2, credentials: "c2")
        XCTAssertEqual(ports.calls.suffix(2), ["claim e 2", "fetch 2 c2"])
    }

    /// Found by the simulator once it drove this code (store seed 96): a waiter whose hit failed
    /// queues for a slot; when it gets one another item fetches the digest already, so it waits
    /// again — as a waiter, with a check timed, not parked with nothing to wake it.
    func testAWaiterWhoseHitFailedAndThatMustWaitAgainIsCheckedAgain() {
        let (executor, ports) = make([1: "d", 2: "d"])
        ports.claims["d"] = Holder(item: "s#0", worker: "w9")
        executor.startTransfer(1, credentials: "c1")
        executor.startTransfer(2, credentials: "c2")
        ports.claims["d"] = nil
        ports.entries = ["d"]
        advance(ports, 0.2)
        XCTAssertEqual(executor.check(now: ports.clock), 2)
        ports.entries = []
        executor.hitFailed(1, credentials: "c1")
        executor.hitFailed(2, credentials: "c2")
        XCTAssertTrue(executor.slotGranted(1))
        XCTAssertEqual(ports.calls.suffix(2), ["claim d 1", "fetch 1 c1"])
        XCTAssertTrue(executor.slotGranted(2))
        XCTAssertEqual(ports.calls.last, "park 2")
        XCTAssertTrue(executor.isWaiting(2), "parked with no wait: nothing would wake it")
        XCTAssertNotNil(executor.nextCheck)
        ports.running.remove(1)
        advance(ports, 0.2)
        XCTAssertEqual(executor.check(now: ports.clock), 1)
        XCTAssertEqual(ports.calls.suffix(2), ["release d", "unpark 2"])
    }

    /// The entry arrives between the look and the claim: the claim goes and the item hits.
    /// The claims folder unusable: the item fetches without a claim (no claim to release after).
    func testAnEntryArrivingAtTheClaimIsAHitAndAFailedClaimStillFetches() {
        let (executor, ports) = make([1: "d", 2: "e"])
        ports.arrivesOnClaim = "d"
        executor.startTransfer(1, credentials: "c")
        XCTAssertEqual(ports.calls, ["claim d 1", "release d", "hit 1"])
        ports.arrivesOnClaim = nil
        ports.claimFails = true
        executor.startTransfer(2, credentials: "c")
        XCTAssertEqual(executor.flights["e"]?.claimed, false)
        executor.close()
        XCTAssertEqual(ports.calls.last, "fetch 2 c")
    }

    /// Fetches alone are checked every lease period (their claims renewed then); at exit their claims go.
    func testFetchesAloneRenewEachLeasePeriodAndTheirClaimsGoAtExit() {
        let (executor, ports) = make([1: "d"])
        executor.startTransfer(1, credentials: "c")
        XCTAssertEqual(executor.nextCheck, ports.clock.addingTimeInterval(10))
        advance(ports, 10)
        executor.check(now: ports.clock)
        XCTAssertEqual(ports.calls.last, "refresh d")
        XCTAssertEqual(executor.nextCheck, ports.clock.addingTimeInterval(10))
        executor.close()
        XCTAssertEqual(ports.calls.last, "release d")
        XCTAssertTrue(executor.flights.isEmpty)
    }

    /// Found by the simulator (store seed 978): a fetch started again under its own claim (a retry
    /// after an outage) renews the claim, so that retries every few seconds never leave it
    /// unrenewed for a lease timeout (another worker would break it and fetch the digest too).
    func testAFetchStartedAgainUnderItsOwnClaimRenewsIt() {
        let (executor, ports) = make([1: "d"])
        executor.startTransfer(1, credentials: "c")
        ports.claims["d"]?.isMine = true
        advance(ports, 25)
        executor.startTransfer(1, credentials: "c")
        XCTAssertEqual(ports.calls, ["claim d 1", "fetch 1 c", "refresh d", "fetch 1 c"])
        XCTAssertEqual(ports.claims["d"]?.renewed, 1)
        XCTAssertEqual(executor.flights["d"]?.refreshedAt, ports.clock)
    }

    /// A waiter that asked for a slot and stopped running meanwhile gives the slot back.
    func testASlotGrantedToAWaiterThatNoLongerRunsGoesBack() {
        let (executor, ports) = make([1: "d", 2: "d"])
        executor.startTransfer(1, credentials: "c1")
        executor.startTransfer(2, credentials: "c2")
        ports.running.remove(1)
        advance(ports, 0.2)
        executor.check(now: ports.clock)
        ports.running.remove(2)
        XCTAssertTrue(executor.slotGranted(2))
        XCTAssertEqual(ports.calls.last, "slotUnused 2")
    }
}
