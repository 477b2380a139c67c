import Foundation
import SpoolCore
import SpoolStore
import XCTest
@testable import SpoolDaemon

/// What one running attempt holds (`RunningAttempt`) is its running phase's: the daemon's item
/// machine holds it from `partOpened`, and when the phase ends it goes — a new attempt starts with
/// no conditional marker and no rate samples of the last one, and an upload's file is closed.
final class RunningAttemptTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let policy = RetryPolicy(maxAttempts: 3, resourceTimeout: 3600, backoff: .init(base: 1, cap: 60))
    var context: LifecycleContext { LifecycleContext(now: t0, stopping: false, jitter: 1) }

    private func running() -> ItemLifecycle {
        var machine = ItemLifecycle(firstQueued: t0)
        _ = machine.handle(.submitted, policy: policy, context: context)
        _ = machine.handle(.slotGranted(space: .fits), policy: policy, context: context)
        XCTAssertEqual(machine.phase, .running)
        return machine
    }

    func testAnAttemptsMarkerAndRateEndWithItsRunningPhase() {
        var machine = running()
        weak var first: RunningAttempt?
        do {
            let attempt = RunningAttempt(file: nil)
            first = attempt
            attempt.askedConditionally(on: ItemMarker(request: "r", group: "g", index: 0, url: "u", finalURL: nil, name: "n",
                                                      bytes: 1, sha256: "", httpStatus: 200, etag: "\"e\"", lastModified: nil,
                                                      contentType: nil, startedAt: "t", finishedAt: "t", attempts: 1))
            XCTAssertNil(attempt.progress(bytes: 0, total: 100, at: t0).rate, "one sample: no rate yet")
            let measured = attempt.progress(bytes: 50, total: 100, at: t0.addingTimeInterval(1))
            XCTAssertEqual(measured.rate, 50)
            XCTAssertEqual(measured.eta, 1)
            XCTAssertTrue(machine.handle(.partOpened(attempt), policy: policy, context: context).isEmpty)
        }
        XCTAssertTrue(machine.state.part === first, "the running phase holds the attempt")
        XCTAssertEqual(first?.previousMarker?.etag, "\"e\"")

        // The daemon stops: the effects carry the attempt, then nothing holds it.
        XCTAssertEqual(machine.handle(.stop, policy: policy, context: context).count, 2)
        XCTAssertEqual(machine.phase, .queued)
        XCTAssertNil(first, "the attempt went with its phase: nothing was reset by hand")
        _ = machine.handle(.slotGranted(space: .fits), policy: policy, context: context)
        XCTAssertNil(machine.state.part, "a new attempt holds nothing until its part is opened")
        let next = RunningAttempt(file: nil)
        XCTAssertNil(next.previousMarker)
        XCTAssertNil(next.progress(bytes: 50, total: 100, at: t0.addingTimeInterval(2)).rate, "no samples of the last attempt")
    }

    func testAnUploadsFileIsClosedWithItsRunningPhase() throws {
        let path = NSTemporaryDirectory() + "running-attempt-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("body".utf8)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var opened = stat()
        XCTAssertEqual(fstat(fd, &opened), 0)
        var machine = running()
        do {
            let attempt = RunningAttempt(sending: fd, digest: OutgoingDigest(fd: fd, size: 4))
            XCTAssertNotNil(attempt.upload?.digest.wait())
            _ = machine.handle(.partOpened(attempt), policy: policy, context: context)
        }
        XCTAssertEqual(machine.state.part?.upload?.fd, fd)
        // Cancelled while it runs: the phase lets the attempt go, and its descriptor closes.
        _ = machine.handle(.operatorCommand(.cancel), policy: policy, context: context)
        guard case .failed(let failure) = machine.phase else { return XCTFail("\(machine.phase)") }
        XCTAssertEqual(failure.code, "cancelled")
        var now = stat()
        XCTAssertTrue(fstat(fd, &now) != 0 || now.st_ino != opened.st_ino, "the upload's descriptor is closed")
    }
}
