import Foundation
@testable import SpoolClient
import SpoolStore
import XCTest

/// `RequestWaiter` against spool folders the test lays out, so an ending can be made to land at
/// exactly the moment that used to lose it: inside the `ended` callback of another request,
/// when the waiter has taken that request's record and is about to wait again. (Against the
/// real daemon: EndToEndTests/WaitEventsTests.)
final class RequestWaiterTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("spoolfetch-waiter-\(getpid())-\(UUID().uuidString)").path
        for folder in ["incoming", "active", "rejected", "prep"] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func write(_ path: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: root + "/" + path))
    }

    /// `broken`'s ending, there before the wait starts: the waiter takes it first, and its
    /// `ended` callback is where the test makes the other ending land.
    private func rejectBroken() throws {
        try write("rejected/broken.error", SpoolJSON.encode(record: ErrorRecord(request: "broken", code: "bad-url", message: "ftp")))
    }

    private func marker(_ request: String) -> [UInt8] {
        SpoolJSON.encode(groupMarker: GroupMarker(group: request, request: request, finishedAt: "2026-01-01T00:00:00Z", items: []))
    }

    /// The flake of `WaitEventsTests.testWaitBlocksUntilTheGroupEndsAndExitsByOutcome`, made
    /// deterministic. A record that becomes visible after the waiter took one that sorts after
    /// it (by ctime, folder, name) was dropped by the ordered reader's cursor (`key <
    /// cursor.record`): with the daemon, two group markers stamped with the same coarse ctime
    /// tick, the later-named one seen first. Here the earlier-stamped marker appears through a
    /// folder renamed into place (the daemon making `final/`), which keeps its old ctime, just
    /// after the rejection of the other request was taken.
    func testAnEndingThatSortsBeforeOneAlreadyTakenIsNotLost() throws {
        try write("active/ok", Array("url: http://h/a\n".utf8))
        try write("active/broken", Array("url: ftp://h/a\n".utf8))
        try write("prep/ok.group.done", marker("ok"))   // stamped first: sorts before broken.error
        let prepared = root + "/prep", final = root + "/final"
        var endings: [RequestWaiter.Ending] = []
        var moveError: Error?
        try rejectBroken()
        let result = try RequestWaiter.wait(for: ["ok", "broken"], spool: root, deadline: Date(timeIntervalSinceNow: 10)) { ending in
            endings.append(ending)
            // The rejection was taken (the reader's cursor is past it); now the marker appears.
            if ending.request == "broken" {
                do { try FileManager.default.moveItem(atPath: prepared, toPath: final) } catch { moveError = error }
            }
        }
        XCTAssertNil(moveError)
        XCTAssertEqual(result, .ended(failed: true), "ok's marker must not be lost: \(endings)")
        XCTAssertEqual(endings.map(\.request), ["broken", "ok"])
        XCTAssertEqual(endings.last?.path, final + "/ok.group.done")
    }

    /// A request filed in `done/` with its group marker, both after the watch was set up and
    /// before the wait took the marker's record (here: while it takes another ending during its
    /// first look; under load, between setting the watch up and the first look): printed as its
    /// marker, as `add --wait` promises, not as the request file.
    func testAnEndingFiledBeforeItsMarkerWasTakenIsPrintedAsTheMarker() throws {
        try FileManager.default.createDirectory(atPath: root + "/final", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/done", withIntermediateDirectories: true)
        try write("active/ok", Array("url: http://h/a\n".utf8))
        try write("active/broken", Array("url: ftp://h/a\n".utf8))
        try rejectBroken()
        var endings: [RequestWaiter.Ending] = []
        var landError: Error?
        let result = try RequestWaiter.wait(for: ["ok", "broken"], spool: root, deadline: Date(timeIntervalSinceNow: 10)) { ending in
            endings.append(ending)
            guard ending.request == "broken" else { return }
            do {
                try self.write("final/ok.group.done", self.marker("ok"))
                try FileManager.default.moveItem(atPath: self.root + "/active/ok", toPath: self.root + "/done/ok")
            } catch { landError = error }
        }
        XCTAssertNil(landError)
        XCTAssertEqual(result, .ended(failed: true))
        XCTAssertEqual(endings.map(\.path), [root + "/rejected/broken.error", root + "/final/ok.group.done"])
    }

    /// The wait for `ok`, with `land` run once, when the wait first blocks (its first look done):
    /// an ending that only the watch can announce.
    private func wait(_ requests: [String], landing land: @escaping () throws -> Void) throws -> (RequestWaiter.Result, [RequestWaiter.Ending]) {
        var endings: [RequestWaiter.Ending] = []
        var landed = false
        var landError: Error?
        let result = try RequestWaiter.wait(for: requests, spool: root, finalFolder: nil, deadline: Date(timeIntervalSinceNow: 10),
                                            beforeBlocking: {
            guard !landed else { return }
            landed = true
            do { try land() } catch { landError = error }
        }, ended: { endings.append($0) })
        XCTAssertTrue(landed)
        XCTAssertNil(landError)
        return (result, endings)
    }

    /// An ending whose group marker the waiter never reads (a consumer took it away at once) is
    /// still seen: the request file arriving in `done/` wakes the waiter, which looks at the
    /// request's folders again instead of trusting the marker's record alone.
    func testAnEndingWithoutItsMarkerIsSeenWhenTheRequestFileIsFiled() throws {
        try write("active/ok", Array("url: http://h/a\n".utf8))
        let (result, endings) = try wait(["ok"]) {
            try FileManager.default.createDirectory(atPath: self.root + "/done", withIntermediateDirectories: true)
            try FileManager.default.moveItem(atPath: self.root + "/active/ok", toPath: self.root + "/done/ok")
        }
        XCTAssertEqual(result, .ended(failed: false), "ok's filing must end its wait")
        XCTAssertEqual(endings, [RequestWaiter.Ending(request: "ok", outcome: "published", path: root + "/done/ok")])
    }

    /// A request queued when the wait starts, then claimed, failed and filed without a marker the
    /// waiter reads: followed by its inode into `failed/`.
    func testAQueuedRequestIsFollowedByItsInodeIntoItsFolder() throws {
        try write("incoming/ok", Array("url: http://h/a\n".utf8))
        let (result, endings) = try wait(["ok"]) {
            try FileManager.default.createDirectory(atPath: self.root + "/failed", withIntermediateDirectories: true)
            try FileManager.default.moveItem(atPath: self.root + "/incoming/ok", toPath: self.root + "/active/ok")
            try self.write("failed/ok.error", SpoolJSON.encode(record: ErrorRecord(request: "ok", code: "http-status", message: "404")))
            try FileManager.default.moveItem(atPath: self.root + "/active/ok", toPath: self.root + "/failed/ok")
        }
        XCTAssertEqual(result, .ended(failed: true))
        XCTAssertEqual(endings, [RequestWaiter.Ending(request: "ok", outcome: "failed", path: root + "/failed/ok.error")])
    }

    /// Nothing lands: the deadline ends the wait, naming what is still open (the hook ran, so
    /// the wait did block on the watch).
    func testNothingLandingEndsAtTheDeadline() throws {
        try write("active/ok", Array("url: http://h/a\n".utf8))
        var endings: [RequestWaiter.Ending] = []
        var blocked = 0
        let result = try RequestWaiter.wait(for: ["ok"], spool: root, finalFolder: nil, deadline: Date(timeIntervalSinceNow: 0.3),
                                            beforeBlocking: { blocked += 1 }, ended: { endings.append($0) })
        XCTAssertEqual(result, .timedOut(open: ["ok"]))
        XCTAssertEqual(endings, [])
        XCTAssertEqual(blocked, 1, "one wake-up: the deadline")
    }
}
