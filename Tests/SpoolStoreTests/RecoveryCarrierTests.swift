import Foundation
import SpoolStore
import XCTest

/// `RecoveryCarrier`, built with fake ports (no spool): one test per row of its table, each
/// checking which ports are called in which order and the outcome.
final class RecoveryCarrierTests: XCTestCase {
    /// Records every port call in order; `voidFails`/`truncateFails`/`noJob` make a port fail.
    final class Ports: RecoveryCarrierPorts {
        struct Fault: Error {}
        var calls: [String] = []
        var hasVoid = false
        var voidFails = false
        var truncateFails = false
        var noJob = false
        func noteStateFile() { calls.append("note") }
        func removeStaging() { calls.append("removeStaging") }
        func truncatePart(to bytes: Int64) throws {
            calls.append("truncate \(bytes)")
            if truncateFails { throw Fault() }
        }
        func makeJob(state: ItemState, marker: ItemMarker, alreadyPublishedAs file: String?) -> String? {
            calls.append("job \(file ?? "part")")
            return noJob ? nil : "job"
        }
        func writeVoided(_ state: ItemState, removing file: String) throws {
            calls.append("void \(file)")
            if voidFails { throw Fault() }
        }
        func removePublished(_ file: String) { calls.append("remove \(file)") }
    }

    let marker = ItemMarker(request: "r", group: "g", index: 0, url: "http://h/f", finalURL: nil, name: "f",
                            bytes: 100, sha256: "ab", httpStatus: 200, etag: "\"e\"", lastModified: nil,
                            contentType: nil, startedAt: "t", finishedAt: "t", attempts: 2)

    private func state(_ phase: ItemState.Phase, marker: ItemMarker? = nil, etag: String? = "\"e\"",
                       segments: Int? = nil, ranges: [[Int64]]? = nil, refreshed: String? = nil) -> ItemState {
        ItemState(request: "r", index: 0, url: "http://h/f", phase: phase, inode: 42, etag: etag, bytes: 10, attempts: 3,
                  marker: marker, bootID: "b1", refreshedURL: refreshed, segments: segments, ranges: ranges)
    }

    private func facts(_ state: ItemState?, part: Int64? = nil) -> RecoveryFacts {
        RecoveryFacts(state: state, partSize: part, partInode: part == nil ? nil : 42, partSHA256: nil, publishedFile: nil,
                      publishedMarkerExists: false, publishedFileExists: false, currentBoot: "b1")
    }

    func testStartOverRemovesStagingButNotTheVoidAndQueuesAfresh() {
        let ports = Ports()
        XCTAssertEqual(RecoveryCarrier.carry(.startOver, facts: facts(nil), ports: ports), .queued(attempts: 0, resume: nil))
        XCTAssertEqual(ports.calls, ["removeStaging"], "no record and no void: nothing for the group end to remove")
    }

    func testAVoidAloneMarksTheItemAsHavingStagingFiles() {
        let ports = Ports()
        ports.hasVoid = true
        _ = RecoveryCarrier.carry(.startOver, facts: facts(nil), ports: ports)
        XCTAssertEqual(ports.calls, ["note", "removeStaging"], "its group end must remove the void")
    }

    func testResumeKeepsThePartAndItsValidators() {
        let ports = Ports()
        let outcome = RecoveryCarrier.carry(.resume(bytes: 60, etag: "\"e\"", lastModified: nil),
                                            facts: facts(state(.running, refreshed: "http://h/g"), part: 60), ports: ports)
        XCTAssertEqual(outcome, .queued(attempts: 3, resume: RecoveredResume(bytes: 60, etag: "\"e\"", lastModified: nil,
                                                                             ranges: nil, refreshedURL: "http://h/g")))
        XCTAssertEqual(ports.calls, ["note"])
    }

    func testResumeCutsAPartPastItsSyncedPrefix() {
        let ports = Ports()
        _ = RecoveryCarrier.carry(.resume(bytes: 40, etag: "\"e\"", lastModified: nil), facts: facts(state(.running), part: 60), ports: ports)
        XCTAssertEqual(ports.calls, ["note", "truncate 40"])
    }

    func testResumeStartsOverWhenThePartCannotBeCut() {
        let ports = Ports()
        ports.truncateFails = true
        let outcome = RecoveryCarrier.carry(.resume(bytes: 40, etag: "\"e\"", lastModified: nil), facts: facts(state(.running), part: 60), ports: ports)
        XCTAssertEqual(outcome, .queued(attempts: 3, resume: nil))
        XCTAssertEqual(ports.calls, ["note", "truncate 40", "removeStaging"])
    }

    func testASegmentedPartsRangesAreKeptNotCut() {
        let ports = Ports()
        let s = state(.running, segments: 2, ranges: [[10, 30, 50], [50, 55, 100]])
        let outcome = RecoveryCarrier.carry(.resume(bytes: 10, etag: "\"e\"", lastModified: nil), facts: facts(s, part: 60), ports: ports)
        XCTAssertEqual(outcome, .queued(attempts: 3, resume: RecoveredResume(bytes: 10, etag: "\"e\"", lastModified: nil,
                                                                             ranges: [[10, 30, 50], [50, 55, 100]], refreshedURL: nil)))
        XCTAssertEqual(ports.calls, ["note"], "a segmented part is never cut to its prefix")
    }

    func testFailedEndsFailedWithItsRecord() {
        let failure = ItemFailure(index: 0, url: "http://h/f", name: "f", code: "http-status", message: "404", attempts: 3)
        let ports = Ports()
        XCTAssertEqual(RecoveryCarrier.carry(.failed(failure), facts: facts(state(.failed)), ports: ports), .failed(failure, attempts: 3))
        XCTAssertEqual(ports.calls, ["note"])
    }

    func testPublishedFromAReadyRecordIsConfirmed() {
        let ports = Ports()
        var named = marker
        named.name = "f-1"
        var confirmed = state(.ready, marker: marker)
        confirmed.phase = .published
        confirmed.finalName = "f-1"
        XCTAssertEqual(RecoveryCarrier.carry(.published(file: "f-1"), facts: facts(state(.ready, marker: marker)), ports: ports),
                       .published(file: "f-1", attempts: 3, marker: named, confirm: confirmed))
    }

    func testPublishedFromAPublishedRecordNeedsNoConfirmation() {
        var named = marker
        named.name = "f"
        XCTAssertEqual(RecoveryCarrier.carry(.published(file: "f"), facts: facts(state(.published, marker: marker)), ports: Ports()),
                       .published(file: "f", attempts: 3, marker: named, confirm: nil))
    }

    func testWriteMarkerMakesAMarkerOnlyJob() {
        let ports = Ports()
        XCTAssertEqual(RecoveryCarrier.carry(.writeMarker(file: "f", marker: marker), facts: facts(state(.ready, marker: marker)), ports: ports),
                       .publishing("job", attempts: 3, wholePart: nil))
        XCTAssertEqual(ports.calls, ["note", "job f"])
    }

    func testWriteMarkerWithoutAStagingFileIsQueuedKeepingStaging() {
        let ports = Ports()
        ports.noJob = true
        XCTAssertEqual(RecoveryCarrier.carry(.writeMarker(file: "f", marker: marker), facts: facts(state(.ready, marker: marker)), ports: ports),
                       .queued(attempts: 3, resume: nil))
        XCTAssertEqual(ports.calls, ["note", "job f"])
    }

    func testPublishPartMakesAJobOfTheWholePart() {
        let ports = Ports()
        XCTAssertEqual(RecoveryCarrier.carry(.publishPart(marker: marker), facts: facts(state(.ready, marker: marker), part: 100), ports: ports),
                       .publishing("job", attempts: 3, wholePart: 100))
        XCTAssertEqual(ports.calls, ["note", "job part"])
    }

    func testPublishPartWithoutAPartStartsOver() {
        let ports = Ports()
        XCTAssertEqual(RecoveryCarrier.carry(.publishPart(marker: marker), facts: facts(state(.ready, marker: marker)), ports: ports),
                       .queued(attempts: 3, resume: nil))
        XCTAssertEqual(ports.calls, ["note", "removeStaging"])
    }

    func testDiscardUnverifiedVoidsBeforeItRemovesTheFile() {
        let ports = Ports()
        let outcome = RecoveryCarrier.carry(.discardUnverified(file: "f", expected: "ab", found: "cd"),
                                            facts: facts(state(.published, marker: marker)), ports: ports)
        XCTAssertEqual(outcome, .queued(attempts: 3, resume: nil))
        XCTAssertEqual(ports.calls, ["note", "removeStaging", "void f", "remove f"])
    }

    func testDiscardUnverifiedLeavesTheFileWhenTheVoidCannotBeWritten() {
        let ports = Ports()
        ports.voidFails = true
        let outcome = RecoveryCarrier.carry(.discardUnverified(file: "f", expected: "ab", found: "cd"),
                                            facts: facts(state(.published, marker: marker)), ports: ports)
        XCTAssertEqual(outcome, .queued(attempts: 3, resume: nil))
        XCTAssertEqual(ports.calls, ["note", "removeStaging", "void f"], "no void, no removal: a later adopter would read it as consumed")
    }
}
