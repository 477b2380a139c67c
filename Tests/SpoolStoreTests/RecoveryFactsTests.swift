import Foundation
import SpoolStore
import XCTest

/// `RecoveryFacts.gather` and `RecoverySpool.preferringPublished`, row by row, over a spool made
/// of dictionaries that counts what is hashed (the daemon's `Recovery` and the simulator both
/// gather through them).
final class RecoveryFactsTests: XCTestCase {
    final class FakeSpool: RecoverySpool {
        var states: [String: ItemState] = [:]
        var partDigests: [String: String] = [:]
        var finals: [String: (inode: UInt64, bytes: Int64, sha: String)] = [:]
        var markers: Set<String> = []
        var voided: [String: ItemState] = [:]
        var hashed: [String] = []

        func state(_ base: String) -> ItemState? { states[base] }
        func partSHA256(_ base: String) -> String? { hashed.append("part " + base); return partDigests[base] }
        func findPublished(name: String, inode: UInt64) -> String? { finals[name]?.inode == inode ? name : nil }
        func publishedSize(_ file: String) -> Int64? { finals[file]?.bytes }
        func hasMarker(ofPublished file: String) -> Bool { markers.contains(file) }
        func sha256(ofPublished file: String) -> String? { hashed.append("final " + file); return finals[file]?.sha }
        func voided(_ base: String) -> ItemState? { voided[base] }
    }

    private func marker(bytes: Int64 = 10, sha: String = "s1", finished: String = "2026-12-06T10:00:00.000Z") -> ItemMarker {
        ItemMarker(request: "r", group: "g", index: 0, url: "http://h/f", finalURL: nil, name: "f", bytes: bytes, sha256: sha,
                   httpStatus: 200, etag: nil, lastModified: nil, contentType: nil, startedAt: finished, finishedAt: finished,
                   attempts: 1)
    }

    private func state(_ phase: ItemState.Phase, request: String = "r", inode: UInt64 = 7, marker: ItemMarker? = nil,
                       finalName: String? = nil) -> ItemState {
        ItemState(request: request, index: 0, url: "http://h/f", phase: phase, inode: inode, etag: "\"e\"", bytes: 5,
                  attempts: 2, marker: marker, finalName: finalName)
    }

    private func gather(_ spool: FakeSpool, journaled: ItemState? = nil, part: (Int64, UInt64)? = nil) -> RecoveryFacts {
        RecoveryFacts.gather(request: "r", index: 0, base: "r.0", journaled: journaled, part: part, markersPerItem: true,
                             currentBoot: "b", spool: spool)
    }

    func testAnotherRequestsRecordsAreNotThisItems() {
        let spool = FakeSpool()
        spool.states["r.0"] = state(.running, request: "other")
        XCTAssertNil(gather(spool, journaled: state(.published, request: "other")).state)
    }

    func testARunningStateGivesWayToAJournalEntryTheItemWasPublishedFrom() {
        let spool = FakeSpool()
        spool.states["r.0"] = state(.running)
        spool.finals["f"] = (7, 10, "s1")
        spool.markers = ["f"]
        let journaled = state(.published, marker: marker(), finalName: "f")
        let facts = gather(spool, journaled: journaled)
        XCTAssertEqual(facts.state, journaled)
        XCTAssertEqual(facts.publishedFile, "f")
        XCTAssertTrue(facts.publishedMarkerExists)
        XCTAssertEqual(spool.hashed, [], "file and marker in place: nothing hashed")
    }

    func testAStateThatIsNotRunningWinsOverTheJournal() {
        let spool = FakeSpool()
        spool.states["r.0"] = state(.failed)
        XCTAssertEqual(gather(spool, journaled: state(.published, marker: marker(), finalName: "f")).state?.phase, .failed)
    }

    func testAPartIsHashedOnlyWhenItCouldBePublishedAgain() {
        let spool = FakeSpool()
        spool.partDigests["r.0"] = "s1"
        let ready = state(.ready, marker: marker())
        XCTAssertNil(gather(spool, journaled: ready, part: (9, 7)).partSHA256, "another size")
        XCTAssertNil(gather(spool, journaled: ready, part: (10, 8)).partSHA256, "another inode")
        XCTAssertEqual(spool.hashed, [])
        XCTAssertEqual(gather(spool, journaled: ready, part: (10, 7)).partSHA256, "s1")
        XCTAssertEqual(spool.hashed, ["part r.0"])
    }

    func testAPublishedFileWithoutItsMarkerIsHashedAgain() {
        let spool = FakeSpool()
        spool.finals["f"] = (7, 10, "other")
        let facts = gather(spool, journaled: state(.ready, marker: marker()))
        XCTAssertEqual(facts.publishedFile, "f", "found by the part's inode")
        XCTAssertTrue(facts.publishedFileExists)
        XCTAssertFalse(facts.publishedMarkerExists)
        XCTAssertEqual(facts.publishedSHA256, "other")
        XCTAssertEqual(RecoveryPlanner.plan(facts), .discardUnverified(file: "f", expected: "s1", found: "other"))
    }

    func testOfTwoRecordsOfOneFileThePublishedOneThenTheOneOfItsSizeThenTheLaterWins() {
        let spool = FakeSpool()
        spool.finals["f"] = (7, 10, "s1")
        let ready = state(.ready, marker: marker(), finalName: "f")
        let published = state(.published, marker: marker(), finalName: "f")
        XCTAssertEqual(spool.preferringPublished(ready, published), published)
        XCTAssertEqual(spool.preferringPublished(published, ready), published)
        let wrongSize = state(.ready, marker: marker(bytes: 11), finalName: "f")
        XCTAssertEqual(spool.preferringPublished(wrongSize, ready), ready)
        let later = state(.ready, marker: marker(finished: "2026-12-06T11:00:00.000Z"), finalName: "f")
        XCTAssertEqual(spool.preferringPublished(ready, later), later)
        XCTAssertEqual(spool.preferringPublished(later, ready), later)
        let unpublished = state(.ready, inode: 99, marker: marker())
        XCTAssertEqual(spool.preferringPublished(unpublished, ready), ready, "only the other names a file")
        XCTAssertEqual(spool.preferringPublished(ready, unpublished), ready)
    }

    /// The gap the simulator found (seed 286): a journal's `published` line whose file a recovery
    /// removed as unverified must not read, to the next adopter, as a file a consumer took.
    func testAJournalRecordWhoseFileWasRemovedAsUnverifiedIsIgnoredAndTheItemFetchedAgain() {
        let spool = FakeSpool()
        let journaled = state(.published, marker: marker(), finalName: "f")
        XCTAssertEqual(RecoveryPlanner.plan(gather(spool, journaled: journaled)), .published(file: "f"),
                       "without the record: file gone under a published line = consumed")
        spool.voided["r.0"] = journaled
        let facts = gather(spool, journaled: journaled)
        XCTAssertNil(facts.state)
        XCTAssertEqual(RecoveryPlanner.plan(facts), .startOver)
        // The adopter's own running state of the fetch again does not bring the voided line back.
        spool.states["r.0"] = state(.running, inode: 9)
        XCTAssertEqual(gather(spool, journaled: journaled).state, spool.states["r.0"])
    }

    func testALaterPublishOfAVoidedItemStillWins() {
        let spool = FakeSpool()
        spool.voided["r.0"] = state(.published, marker: marker(), finalName: "f")
        // Fetched again, same name and digest: a new marker time and a new part.
        let again = state(.published, inode: 9, marker: marker(finished: "2026-12-06T11:00:00.000Z"), finalName: "f")
        spool.finals["f"] = (9, 10, "s1")
        spool.markers = ["f"]
        XCTAssertEqual(RecoveryPlanner.plan(gather(spool, journaled: again)), .published(file: "f"))
        spool.finals = [:]; spool.markers = []
        XCTAssertEqual(RecoveryPlanner.plan(gather(spool, journaled: again)), .published(file: "f"), "then consumed")
    }

    /// Of two dead journals' records of one file, the one `B.voided` names loses whatever its size
    /// or time: else a real publish after the voided one is taken for the voided one, and fetched again.
    func testAVoidedRecordLosesToAnyOtherRecordOfTheItem() {
        let spool = FakeSpool()
        let voided = state(.published, marker: marker(finished: "2026-12-06T12:00:00.000Z"), finalName: "f")
        let later = state(.published, inode: 9, marker: marker(), finalName: "f")
        spool.finals["f"] = (9, 10, "s1")
        XCTAssertEqual(spool.preferringPublished(later, voided), voided, "without the record: the later time wins")
        spool.voided["r.0"] = voided
        XCTAssertEqual(spool.preferringPublished(later, voided), later)
        XCTAssertEqual(spool.preferringPublished(voided, later), later)
    }
}
