import Foundation
import SpoolTestSupport
import XCTest

/// The daemon never runs blind: a watched folder deleted or moved away under it is reported at
/// error level, made again, watched again, and what lands in it afterwards is fetched.
final class WatcherTests: SpoolTestCase {
    private func lostLine(_ daemon: DaemonProcess) -> Substring? {
        daemon.stderrText.split(separator: "\n").first { $0.contains("watched folder lost") }
    }

    func testIncomingDeletedUnderARunningDaemonIsMadeAgainAndItsNextRequestPublished() throws {
        let body = TestBody.random(count: 20_000, seed: 41)
        server.serve("/after-delete", body: body)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)

        // As a replaced share looks: the folder and what was in it are gone; then an
        // administrator (or the share) brings an empty one back.
        FileManager.default.createFile(atPath: spool.path("incoming", ".partial.tmp"), contents: Data("x".utf8))
        try FileManager.default.removeItem(atPath: spool.path("incoming"))
        try daemon.waitForStderr(containing: "watched folder lost", timeout: 30)
        try FileManager.default.createDirectory(atPath: spool.path("incoming"), withIntermediateDirectories: true)

        try spool.drop("after-delete", server.url("/after-delete") + "\n")
        try DirectoryWaiter.waitForFile("after-delete.done", in: spool.path("final"), timeout: 30)
        XCTAssertEqual(try spool.read("final", "after-delete"), body)
        let line = try XCTUnwrap(lostLine(daemon), daemon.stderrText)
        XCTAssertTrue(line.contains("level=error"), String(line))
        XCTAssertTrue(line.contains("was deleted"), String(line))
        XCTAssertTrue(line.contains(spool.path("incoming")), String(line))
    }

    func testIncomingMovedAwayIsMadeAgainByTheDaemonAndWatched() throws {
        let body = TestBody.random(count: 5_000, seed: 42)
        server.serve("/after-move", body: body)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)

        XCTAssertEqual(rename(spool.path("incoming"), spool.path("incoming.old")), 0)
        try daemon.waitForStderr(containing: "watched folder lost", timeout: 30)
        // The daemon made the folder again by itself, with the root's permissions.
        try DirectoryWaiter.waitForFile("incoming", in: spool.root, timeout: 30)
        var st = stat()
        XCTAssertEqual(lstat(spool.path("incoming"), &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFDIR)

        try spool.drop("after-move", server.url("/after-move") + "\n")
        try DirectoryWaiter.waitForFile("after-move.done", in: spool.path("final"), timeout: 30)
        XCTAssertEqual(try spool.read("final", "after-move"), body)
        let line = try XCTUnwrap(lostLine(daemon), daemon.stderrText)
        XCTAssertTrue(line.contains("level=error") && line.contains("was moved away"), String(line))
        XCTAssertEqual(server.requests(for: "/after-move").count, 1)
    }
}
