import Foundation
import SpoolCore
import XCTest

/// `PublishEnding`, built with fake ports (no spool, no daemon): one test per row of its table,
/// each checking the event and which ports were asked, in which order.
final class PublishEndingTests: XCTestCase {
    struct Job: Equatable {
        var name = "j"
        var alreadyPublishedAs: String? = nil
    }

    /// Records every port call in order; the fields say what the disk holds.
    final class Ports: PublishEndingPorts {
        typealias Item = Int
        typealias Job = PublishEndingTests.Job
        typealias Receipt = String
        struct Fault: Error {}
        var calls: [String] = []
        var named = true
        var exists = true
        var namingFails = false
        var never: String? = nil

        func partIsNamed(_ job: Job) -> Bool { calls.append("named?"); return named }
        func partExists(_ item: Int, _ job: Job) -> Bool { calls.append("exists? \(item)"); return exists }
        func namePart(_ item: Int, _ job: Job) throws {
            calls.append("name \(item)")
            if namingFails { throw Fault() }
            named = true
        }
        func handedBack(_ job: Job, alreadyPublishedAs file: String?) -> Job {
            calls.append("handedBack \(file ?? "-")")
            var job = job
            job.alreadyPublishedAs = file
            return job
        }
        func neverFits(_ job: Job) -> String? { calls.append("never?"); return never }
        func receipt(_ item: Int, _ job: Job, file: String) -> String? { calls.append("receipt \(file)"); return "receipt of \(file)" }
        func namingFailed(_ item: Int, _ error: any Error) { calls.append("namingFailed") }
        func publishFailed(_ item: Int, message: String) { calls.append("failed: \(message)") }
    }

    typealias Event = ItemEvent<Int, Job, String>

    private func end(_ outcome: PublishOutcome, _ ports: Ports, job: Job = Job()) -> Event {
        PublishEnding.event(outcome, job: job, of: 7, ports: ports)
    }

    private func failure(_ event: Event, file: StaticString = #filePath, line: UInt = #line) -> (PublishFault, Job?)? {
        guard case .publishFailed(let fault, let job) = event else {
            XCTFail("not a publishFailed: \(event)", file: file, line: line)
            return nil
        }
        return (fault, job)
    }

    private func failed(_ finalName: String? = nil, permanent: Bool = false, diskFull: Bool = false) -> PublishOutcome {
        .failed(finalName: finalName, permanent: permanent, diskFull: diskFull, message: "EIO on final")
    }

    func testPublishedWithAMarkerKeepsNoReceiptAndAsksNothing() {
        let ports = Ports()
        guard case .publishSucceeded(let file, let marker, let receipt) = end(.published(file: "f", marker: "/d/f.done"), ports) else {
            return XCTFail("not a publishSucceeded")
        }
        XCTAssertEqual([file, marker], ["f", "/d/f.done"])
        XCTAssertNil(receipt, "a per-file marker already holds the facts")
        XCTAssertEqual(ports.calls, [])
    }

    func testPublishedWithoutAMarkerCarriesTheReceiptForTheGroupMarker() {
        let ports = Ports()
        guard case .publishSucceeded(let file, let marker, let receipt) = end(.published(file: "f-1", marker: nil), ports) else {
            return XCTFail("not a publishSucceeded")
        }
        XCTAssertEqual([file, marker], ["f-1", ""], "under markers: group the item's marker path is empty")
        XCTAssertEqual(receipt, "receipt of f-1", "asked under the name the file got")
        XCTAssertEqual(ports.calls, ["receipt f-1"])
    }

    func testDataAlreadyInTheFinalFolderComesBackWithTheJobAndNoPartIsLookedAt() {
        let ports = Ports()
        ports.named = false
        ports.exists = false
        guard case let (fault, job)? = failure(end(failed("f"), ports)) else { return }
        XCTAssertEqual(job, Job(alreadyPublishedAs: "f"), "its next try writes only the marker")
        XCTAssertEqual(fault, PublishFault(message: "EIO on final"), "its part is in the final folder: not gone")
        XCTAssertEqual(ports.calls, ["handedBack f", "failed: EIO on final"], "no part to name or find")
    }

    func testANamedPartThatIsGoneFailsAsPartGoneAndIsNotNamed() {
        let ports = Ports()
        ports.exists = false
        guard case let (fault, job)? = failure(end(failed(), ports)) else { return }
        XCTAssertTrue(fault.partGone)
        XCTAssertEqual(job, Job())
        XCTAssertEqual(ports.calls, ["handedBack -", "named?", "exists? 7", "failed: EIO on final"])
    }

    func testANamedPartStillThereWaitsAsItIs() {
        let ports = Ports()
        guard case let (fault, _)? = failure(end(failed(), ports)) else { return }
        XCTAssertFalse(fault.partGone)
        XCTAssertEqual(ports.calls, ["handedBack -", "named?", "exists? 7", "failed: EIO on final"], "already named: not again")
    }

    func testAnUnnamedPartIsNeverGoneAndIsNamedForTheNextTry() {
        let ports = Ports()
        ports.named = false
        ports.exists = false   // no name in staging to find it by: the job holds it open
        guard case let (fault, job)? = failure(end(failed(), ports)) else { return }
        XCTAssertFalse(fault.partGone, "an unnamed part is held open by the job: never gone")
        XCTAssertEqual(job, Job(), "nothing in the final folder")
        XCTAssertEqual(ports.calls, ["handedBack -", "named?", "name 7", "failed: EIO on final"],
                       "named, a restart publishes it from staging instead of downloading it again")
        XCTAssertTrue(ports.named)
    }

    func testAPermanentFailureDoesNotNameThePart() {
        let ports = Ports()
        ports.named = false
        guard case let (fault, _)? = failure(end(failed(permanent: true), ports)) else { return }
        XCTAssertTrue(fault.permanent)
        XCTAssertFalse(fault.partGone)
        XCTAssertEqual(ports.calls, ["handedBack -", "named?", "failed: EIO on final"], "it fails for good: no next try")
    }

    func testANamingFailureIsLoggedAndTheItemStillWaits() {
        let ports = Ports()
        ports.named = false
        ports.namingFails = true
        guard case let (fault, _)? = failure(end(failed(), ports)) else { return }
        XCTAssertEqual(fault, PublishFault(message: "EIO on final"))
        XCTAssertEqual(ports.calls, ["handedBack -", "named?", "name 7", "namingFailed", "failed: EIO on final"])
    }

    func testAFullDiskTheBodyCanNeverFitSaysWhy() {
        let ports = Ports()
        ports.never = "9 bytes can never fit on final"
        guard case let (fault, _)? = failure(end(failed(diskFull: true), ports)) else { return }
        XCTAssertEqual(fault, PublishFault(diskFull: true, neverFits: true, message: "EIO on final; 9 bytes can never fit on final"))
        XCTAssertEqual(ports.calls.last, "failed: EIO on final; 9 bytes can never fit on final", "logged with the reason")
    }

    func testAFullDiskTheBodyMayFitLaterWaitsForSpace() {
        let ports = Ports()
        guard case let (fault, _)? = failure(end(failed(diskFull: true), ports)) else { return }
        XCTAssertEqual(fault, PublishFault(diskFull: true, message: "EIO on final"))
        XCTAssertEqual(ports.calls, ["handedBack -", "named?", "exists? 7", "never?", "failed: EIO on final"])
    }

    func testOnlyAFullDiskAsksWhetherTheBodyCanEverFit() {
        let ports = Ports()
        ports.never = "never"
        guard case let (fault, _)? = failure(end(failed(), ports)) else { return }
        XCTAssertFalse(fault.neverFits)
        XCTAssertFalse(ports.calls.contains("never?"))
    }
}
