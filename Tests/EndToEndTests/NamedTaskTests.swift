import Foundation
import SpoolfetchKit
import SpoolTestSupport
import XCTest

/// SpoolfetchKit's tasks named by the program: asking for a task of a name again (a restarted
/// program, a kill between the add and saving its identifier) finds it queued, claimed or ended
/// and never adds a second; once its group ended, `endedGroup(of:)` reports it from the spool.
final class NamedTaskTests: SpoolTestCase {
    func testATaskOfANameIsAddedOnceAndItsEndedGroupIsFound() throws {
        let body = TestBody.random(count: 20_000, seed: 64)
        server.serve("/named.bin", body: body)
        let session = SpoolSession(spool: URL(fileURLWithPath: spool.root))
        var request = SpoolTaskRequest(url: URL(string: server.url("/named.bin"))!)
        request.sha256 = TestBody.sha256Hex(body)

        XCTAssertNil(session.task(named: "nightly-dump"))
        let first = try session.downloadTask(with: request, named: "nightly-dump")
        let again = try session.downloadTask(with: request, named: "nightly-dump")
        XCTAssertEqual(first.taskIdentifier, "nightly-dump")
        XCTAssertEqual(again.taskIdentifier, "nightly-dump")
        XCTAssertEqual(spool.files(in: "incoming"), ["nightly-dump"], "asked twice, added once")
        XCTAssertNil(session.endedGroup(of: "nightly-dump"), "not ended yet")

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try session.downloadTask(with: request, named: "nightly-dump").taskIdentifier, "nightly-dump",
                       "ended: found, not added again")
        XCTAssertEqual(spool.files(in: "incoming"), [])
        let ended = try XCTUnwrap(session.endedGroup(of: "nightly-dump"))
        XCTAssertEqual(ended.published, 1)
        XCTAssertEqual(ended.failed, 0)
        XCTAssertEqual(ended.items.map(\.taskIdentifier), ["nightly-dump#0"])
        XCTAssertEqual(ended.items.first?.location?.path, spool.path("final", "named.bin"))
        XCTAssertEqual(ended.items.first?.sha256, TestBody.sha256Hex(body))
        XCTAssertEqual(ended.marker.path, spool.path("final", "nightly-dump.group.done"))
        XCTAssertEqual(server.requests(for: "/named.bin").count, 1)
    }

    /// A task cut by its deadline while its host was down: its error carries the cause, in the
    /// session's events and in `endedGroup(of:)`.
    func testADeadlinesCauseReachesTheSessionsErrors() async throws {
        let down = try RefusingPort()
        let session = SpoolSession(spool: URL(fileURLWithPath: spool.root))
        try spool.drop("late", "deadline: 1s\nurl: http://127.0.0.1:\(down.port)/x\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, stderr)
        let ended = try XCTUnwrap(session.endedGroup(of: "late"))
        let error = try XCTUnwrap(ended.items.first?.error)
        XCTAssertEqual(error.code, "deadline")
        XCTAssertEqual(error.cause?.code, "host-unreachable")
        XCTAssertEqual(error.cause?.host, "127.0.0.1:\(down.port)")
        XCTAssertTrue(error.description.contains("(cause host-unreachable: host 127.0.0.1:\(down.port) unreachable"), error.description)
        var failure: SpoolTaskError?
        for await event in try session.events() {
            if case .didCompleteWithError(let e) = event.kind { failure = e }
            if case .didFinishEvents = event.kind { break }
        }
        XCTAssertEqual(failure, error, "the event's error is the group marker's")
    }

    func testANameThatIsNoPlainFileNameIsRefused() throws {
        let session = SpoolSession(spool: URL(fileURLWithPath: spool.root))
        let request = SpoolTaskRequest(url: URL(string: "http://127.0.0.1:1/x")!)
        XCTAssertThrowsError(try session.downloadTask(with: request, named: "../escape"))
        XCTAssertThrowsError(try session.downloadTask(with: request, named: ".hidden"))
    }
}
