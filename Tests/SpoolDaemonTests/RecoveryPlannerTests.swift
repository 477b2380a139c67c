import Foundation
import SpoolStore
import XCTest
@testable import SpoolDaemon

/// One test per row of `RecoveryPlanner`'s table (the "after a crash" column of the README's
/// state table).
final class RecoveryPlannerTests: XCTestCase {
    let marker = ItemMarker(request: "r", group: "g", index: 0, url: "http://h/f", finalURL: nil, name: "f",
                            bytes: 100, sha256: "ab", httpStatus: 200, etag: "\"e\"", lastModified: nil,
                            contentType: nil, startedAt: "t", finishedAt: "t", attempts: 2)

    /// Written in boot "b1" (this one, see `plan`) unless told otherwise.
    private func state(_ phase: ItemState.Phase, marker: ItemMarker? = nil, etag: String? = nil,
                       lastModified: String? = nil, failure: ItemFailure? = nil,
                       synced: Int64? = nil, boot: String? = "b1") -> ItemState {
        ItemState(request: "r", index: 0, url: "http://h/f", phase: phase, inode: 42, etag: etag,
                  lastModified: lastModified, attempts: 2, marker: marker, failure: failure,
                  syncedBytes: synced, bootID: boot)
    }

    /// `partInode` 42 is the part the state (`inode: 42`) describes.
    /// `partSHA256` "ab" is the marker's digest; so is `fileSHA256`, the published file's, unless told.
    private func plan(_ state: ItemState?, part: Int64? = nil, partInode: UInt64 = 42, partSHA256: String = "ab",
                      file: String? = nil, fileExists: Bool = true, markerExists: Bool = false,
                      groupMarker: Bool = false, fileSHA256: String? = "ab") -> RecoveryPlan {
        RecoveryPlanner.plan(RecoveryFacts(state: state, partSize: part, partInode: part == nil ? nil : partInode,
                                           partSHA256: part == nil ? nil : partSHA256, publishedFile: file,
                                           publishedMarkerExists: markerExists, publishedFileExists: fileExists,
                                           markersPerItem: !groupMarker, currentBoot: "b1",
                                           publishedSHA256: file != nil && fileExists && !markerExists ? fileSHA256 : nil))
    }

    func testNoStateStartsOver() {
        XCTAssertEqual(plan(nil), .startOver)
        XCTAssertEqual(plan(nil, part: 50), .startOver, "a part without a state cannot be trusted")
    }

    func testFailedStaysFailedWithItsRecord() {
        let failure = ItemFailure(index: 0, url: "http://h/f", name: "f", code: "http-status", message: "404", attempts: 1)
        XCTAssertEqual(plan(state(.failed, failure: failure)), .failed(failure))
    }

    func testFailedWithoutARecordStartsOver() {
        XCTAssertEqual(plan(state(.failed)), .startOver)
    }

    func testReadyWithoutMarkerFactsStartsOver() {
        XCTAssertEqual(plan(state(.ready), part: 100), .startOver)
        XCTAssertEqual(plan(state(.published), part: 100), .startOver)
    }

    func testDataAndMarkerInPlaceIsPublished() {
        for phase in [ItemState.Phase.ready, .published] {
            XCTAssertEqual(plan(state(phase, marker: marker), file: "f-1", markerExists: true), .published(file: "f-1"))
            // A part still beside it (link + unlink interrupted, or a copy across filesystems) changes nothing.
            XCTAssertEqual(plan(state(phase, marker: marker), part: 100, file: "f-1", markerExists: true), .published(file: "f-1"))
        }
    }

    func testDataInPlaceWithoutMarkerWritesTheMarkerOnly() {
        XCTAssertEqual(plan(state(.ready, marker: marker), file: "f"), .writeMarker(file: "f", marker: marker))
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 100, file: "f"), .writeMarker(file: "f", marker: marker))
    }

    /// A marker is written from the bytes in the final folder: a file without its marker whose
    /// bytes do not hash to the journaled digest (a power cut lost them, a stray write changed
    /// them, the old file of an `on-exists: replace` still under the name) is removed, and the
    /// item starts over — under per-item and group markers alike, and whatever the phase.
    func testDataInPlaceWithoutMarkerWhoseBytesDoNotMatchIsDiscarded() {
        for phase in [ItemState.Phase.ready, .published] {
            XCTAssertEqual(plan(state(phase, marker: marker), file: "f", fileSHA256: "cd"),
                           .discardUnverified(file: "f", expected: "ab", found: "cd"))
            XCTAssertEqual(plan(state(phase, marker: marker), part: 100, file: "f", fileSHA256: nil),
                           .discardUnverified(file: "f", expected: "ab", found: nil), "an unreadable file is not vouched for")
            XCTAssertEqual(plan(state(phase, marker: marker), file: "f", groupMarker: true, fileSHA256: "cd"),
                           .discardUnverified(file: "f", expected: "ab", found: "cd"), "its group-marker line is a marker too")
            XCTAssertEqual(plan(state(phase, marker: marker), file: "f", groupMarker: true), .published(file: "f"))
        }
        XCTAssertEqual(plan(state(.ready, marker: marker), file: "f", markerExists: true, fileSHA256: "cd"), .published(file: "f"),
                       "a file with its marker is the consumer's: not read again")
    }

    func testCompletePartIsPublishedAgain() {
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 100), .publishPart(marker: marker))
    }

    func testMissingOrShortPartStartsOver() {
        XCTAssertEqual(plan(state(.ready, marker: marker)), .startOver)
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 99), .startOver)
    }

    func testAPartOfAnotherAttemptIsNotPublishedUnderTheRecordsMarker() {
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 100, partInode: 43), .startOver,
                       "downloaded again after the record was journaled: its bytes are not the marker's")
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 100, partInode: 43, groupMarker: true), .startOver)
    }

    func testAPartWithTheRecordsInodeAndSizeButAnotherDigestIsNotPublished() {
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 100, partSHA256: "cd"), .startOver,
                       "a later attempt's part that was given the freed inode of the record's")
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 100, partSHA256: "cd", groupMarker: true), .startOver)
    }

    func testRunningWithValidatorAndPartResumes() {
        XCTAssertEqual(plan(state(.running, etag: "\"e\""), part: 4096), .resume(bytes: 4096, etag: "\"e\"", lastModified: nil))
        XCTAssertEqual(plan(state(.running, lastModified: "Mon"), part: 1), .resume(bytes: 1, etag: nil, lastModified: "Mon"))
        XCTAssertEqual(plan(state(.running, etag: "W/\"e\"", lastModified: "Mon"), part: 1),
                       .resume(bytes: 1, etag: "W/\"e\"", lastModified: "Mon"), "resumed with the date")
    }

    /// After a power cut the part may be as long as it was, with blocks that never reached the
    /// disk: only the prefix synced before the state was written is resumed from.
    func testRunningFromAnotherBootResumesFromTheSyncedPrefixOnly() {
        XCTAssertEqual(plan(state(.running, etag: "\"e\"", synced: 1024, boot: "b0"), part: 4096),
                       .resume(bytes: 1024, etag: "\"e\"", lastModified: nil))
        XCTAssertEqual(plan(state(.running, etag: "\"e\"", synced: 8192, boot: "b0"), part: 4096),
                       .resume(bytes: 4096, etag: "\"e\"", lastModified: nil), "a part shorter than synced: a later truncation")
        XCTAssertEqual(plan(state(.running, etag: "\"e\"", synced: 0, boot: "b0"), part: 4096), .startOver)
        XCTAssertEqual(plan(state(.running, etag: "\"e\"", boot: "b0"), part: 4096), .startOver, "nothing synced")
        XCTAssertEqual(plan(state(.running, etag: "\"e\"", synced: 1024, boot: nil), part: 4096),
                       .resume(bytes: 1024, etag: "\"e\"", lastModified: nil), "no boot recorded: another boot's")
        XCTAssertEqual(plan(state(.running, etag: "\"e\"", synced: 1024), part: 4096),
                       .resume(bytes: 4096, etag: "\"e\"", lastModified: nil), "this boot: a kill loses no write")
    }

    /// A segmented body's part holds ranges past its in-order prefix, with holes between them:
    /// in this boot too, only the synced prefix is resumed from.
    func testRunningSegmentedResumesFromTheSyncedPrefixOnlyInAnyBoot() {
        var segmented = state(.running, etag: "\"e\"", synced: 1024)
        segmented.segments = 6
        XCTAssertEqual(plan(segmented, part: 4096), .resume(bytes: 1024, etag: "\"e\"", lastModified: nil))
        segmented.syncedBytes = nil
        XCTAssertEqual(plan(segmented, part: 4096), .startOver, "nothing synced")
        segmented.bootID = "b0"
        segmented.syncedBytes = 2048
        XCTAssertEqual(plan(segmented, part: 4096), .resume(bytes: 2048, etag: "\"e\"", lastModified: nil))
    }

    /// In the boot it was written in, a segmented state's ranges are kept: the prefix it names
    /// and `[from, done)` of each range; in another boot, or with ranges that do not follow each
    /// other, only the synced prefix.
    func testRunningSegmentedKeepsItsRangesInThisBootOnly() {
        var segmented = state(.running, etag: "\"e\"", synced: 512)
        segmented.segments = 3
        segmented.bytes = 1000
        segmented.ranges = [[1500, 2000, 2500], [2500, 2600, 4096]]
        let facts = RecoveryFacts(state: segmented, partSize: 4096, partInode: 42, partSHA256: nil, publishedFile: nil,
                                  publishedMarkerExists: false, publishedFileExists: false, markersPerItem: true, currentBoot: "b1")
        XCTAssertEqual(RecoveryPlanner.plan(facts), .resume(bytes: 1000, etag: "\"e\"", lastModified: nil))
        XCTAssertEqual(RecoveryPlanner.keptRanges(facts), [[1500, 2000, 2500], [2500, 2600, 4096]])
        var gap = facts
        gap.state!.ranges = [[1500, 2000, 2400], [2500, 2600, 4096]]
        XCTAssertNil(RecoveryPlanner.keptRanges(gap))
        XCTAssertEqual(RecoveryPlanner.plan(gap), .resume(bytes: 512, etag: "\"e\"", lastModified: nil))
        var otherBoot = facts
        otherBoot.state!.bootID = "b0"
        XCTAssertNil(RecoveryPlanner.keptRanges(otherBoot))
        XCTAssertEqual(RecoveryPlanner.plan(otherBoot), .resume(bytes: 512, etag: "\"e\"", lastModified: nil))
        var pastThePart = facts
        pastThePart.state!.ranges = [[1500, 5000, 5000]]
        XCTAssertNil(RecoveryPlanner.keptRanges(pastThePart), "a range done past the part's end")
    }

    /// After a power cut (another boot) a segmented state's ranges are kept as far as each was
    /// synced (`[from, done, to, durable]`): the synced prefix, then `[from, durable)` of each.
    func testRunningSegmentedKeepsItsDurableRangesInAnotherBoot() {
        var segmented = state(.running, etag: "\"e\"", synced: 512)
        segmented.segments = 3
        segmented.bytes = 1000
        segmented.bootID = "b0"
        segmented.ranges = [[1500, 2000, 2500, 1800], [2500, 2600, 4096, 2500]]
        let facts = RecoveryFacts(state: segmented, partSize: 4096, partInode: 42, partSHA256: nil, publishedFile: nil,
                                  publishedMarkerExists: false, publishedFileExists: false, markersPerItem: true, currentBoot: "b1")
        XCTAssertEqual(RecoveryPlanner.keptRanges(facts), [[1500, 1800, 2500], [2500, 2500, 4096]])
        XCTAssertEqual(RecoveryPlanner.plan(facts), .resume(bytes: 512, etag: "\"e\"", lastModified: nil))
        var sameBoot = facts
        sameBoot.currentBoot = "b0"
        XCTAssertEqual(RecoveryPlanner.keptRanges(sameBoot), [[1500, 2000, 2500], [2500, 2600, 4096]], "written, in its boot")
        var nothingSynced = facts
        nothingSynced.state!.ranges = [[1500, 2000, 2500, 1500], [2500, 2600, 4096, 2500]]
        XCTAssertNil(RecoveryPlanner.keptRanges(nothingSynced))
        XCTAssertEqual(RecoveryPlanner.plan(nothingSynced), .resume(bytes: 512, etag: "\"e\"", lastModified: nil))
    }

    func testRunningWithOnlyAWeakETagStartsOver() {
        XCTAssertEqual(plan(state(.running, etag: "W/\"e\""), part: 4096), .startOver,
                       "a weak ETag promises no bytes: If-Range must not carry it")
    }

    func testRunningWithoutValidatorOrPartStartsOver() {
        XCTAssertEqual(plan(state(.running), part: 4096), .startOver, "no validator: If-Range impossible")
        XCTAssertEqual(plan(state(.running, etag: "\"e\"")), .startOver, "no part")
        XCTAssertEqual(plan(state(.running, etag: "\"e\""), part: 0), .startOver, "empty part")
    }

    // MARK: markers: group

    func testGroupMarkerModeDataInPlaceIsPublishedWithoutAMarker() {
        for phase in [ItemState.Phase.ready, .published] {
            XCTAssertEqual(plan(state(phase, marker: marker), file: "f-1", groupMarker: true), .published(file: "f-1"),
                           "no per-file marker in this mode: the data file under its final name is the proof")
            XCTAssertEqual(plan(state(phase, marker: marker), part: 100, file: "f", groupMarker: true), .published(file: "f"),
                           "a part left beside it is not published a second time")
        }
    }

    func testAnEntryWhoseBatchFinishedPublishingEndsPublishedThoughAConsumerTookFileAndMarker() {
        var published = state(.published, marker: marker)
        published.finalName = "f"
        XCTAssertEqual(plan(published, file: "f", fileExists: false, markerExists: false), .published(file: "f"),
                       "not a marker to write for a file that is gone, nor a second delivery")
        XCTAssertEqual(plan(published, file: "f", fileExists: true, markerExists: false), .writeMarker(file: "f", marker: marker),
                       "named by the line written once the data was in place: its marker may not have been")
        XCTAssertEqual(plan(state(.ready, marker: marker), file: "f", markerExists: false),
                       .writeMarker(file: "f", marker: marker), "ready: the marker may never have been written")
    }

    func testGroupMarkerModeWithoutDataFilePublishesThePartOrStartsOver() {
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 100, groupMarker: true), .publishPart(marker: marker))
        XCTAssertEqual(plan(state(.ready, marker: marker), part: 99, groupMarker: true), .startOver)
        XCTAssertEqual(plan(state(.ready), part: 100, file: "f", groupMarker: true), .startOver, "no marker facts")
    }
}
