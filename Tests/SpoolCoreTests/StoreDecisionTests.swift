import SpoolCore
import XCTest

/// `StoreDecision`'s table, row by row (the rows in its doc comment, in order).
final class StoreDecisionTests: XCTestCase {
    private let d = String(repeating: "ab", count: 32)

    func testNoDigestOrStoreOffFetchesWithoutTheStore() {
        XCTAssertEqual(StoreDecision.decide(digest: nil, storeOn: true, entryPresent: false, localFetcher: nil, claim: nil),
                       .fetch(claim: false, breaking: false))
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: false, entryPresent: true, localFetcher: "R#1", claim: .live(item: "S#0")),
                       .fetch(claim: false, breaking: false), "the store off: nothing else counts")
    }

    func testAnEntryInTheStoreIsAHitWhatEverElseHolds() {
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: true, entryPresent: true, localFetcher: nil, claim: nil), .hit)
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: true, entryPresent: true, localFetcher: "R#1", claim: .live(item: "S#0")), .hit)
    }

    func testAFetchOfThisWorkerIsWaitedFor() {
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: true, entryPresent: false, localFetcher: "R#1", claim: nil),
                       .wait(by: "R#1", elsewhere: false))
    }

    func testNoClaimOrOurOwnFetchesAndClaims() {
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: true, entryPresent: false, localFetcher: nil, claim: StoreDecision.Claim.none),
                       .fetch(claim: true, breaking: false))
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: true, entryPresent: false, localFetcher: nil, claim: .own),
                       .fetch(claim: true, breaking: false))
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: true, entryPresent: false, localFetcher: nil, claim: nil),
                       .fetch(claim: true, breaking: false), "a claim not read counts as none")
    }

    func testAnothersLiveClaimIsWaitedFor() {
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: true, entryPresent: false, localFetcher: nil, claim: .live(item: "S#0 on w2")),
                       .wait(by: "S#0 on w2", elsewhere: true))
    }

    func testAStaleClaimIsBrokenAndTheItemFetches() {
        XCTAssertEqual(StoreDecision.decide(digest: d, storeOn: true, entryPresent: false, localFetcher: nil, claim: .stale(item: "S#0")),
                       .fetch(claim: true, breaking: true))
    }
}
