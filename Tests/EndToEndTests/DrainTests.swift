import Foundation
import SpoolTestSupport
import XCTest

/// Drains for cron (`run --once`, `run --due`) and a configuration reload on SIGHUP.
final class DrainTests: SpoolTestCase {
    func testDueDrainFetchesWhatIsDueAndLeavesAFutureItemQueued() throws {
        server.serve("/now", body: Array("now".utf8))
        server.serve("/later", body: Array("later".utf8))
        try spool.drop("tonight", "url: \(server.url("/now"))\n")
        try spool.drop("future", "url: \(server.url("/later"))\nearliest-start: 2030-01-01T02:00:00Z\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, mode: "--due", timeout: 30)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "now"), Array("now".utf8))
        XCTAssertTrue(server.requests(for: "/later").isEmpty, "an item that is not due is never requested")
        XCTAssertTrue(stderr.contains("due drain done"), stderr)
        XCTAssertTrue(stderr.contains("2030-01-01T02:00:00"), "the log says when the next item is due: \(stderr)")
        XCTAssertFalse(spool.files(in: "done").contains("future"), "the future request did not end")
        XCTAssertFalse(spool.files(in: "failed").contains("future"))

        // The next night's drain still has it (adopted from the dead drain's claim), and still leaves it.
        let (again, stderr2) = try DaemonProcess.drain(spool: spool.root, mode: "--due", timeout: 30)
        XCTAssertEqual(again, 0, stderr2)
        XCTAssertTrue(server.requests(for: "/later").isEmpty)
        XCTAssertTrue(stderr2.contains("\"left\"") || stderr2.contains("left=1"), stderr2)
    }

    func testOnceDrainSaysWhatItWaitsFor() throws {
        server.serve("/soon", body: Array("soon".utf8))
        let soon = Date().addingTimeInterval(3)
        try spool.drop("soon", "url: \(server.url("/soon"))\nearliest-start: \(rfc3339(soon))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [], timeout: 30)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertTrue(stderr.contains("drain is waiting for items that are not due yet"), stderr)
        XCTAssertTrue(stderr.contains(rfc3339(soon).prefix(19)), "names the time it waits for: \(stderr)")
        XCTAssertEqual(try spool.read("final", "soon"), Array("soon".utf8))
    }

    func testSIGHUPReloadsTheConfigurationFileAndNeverKills() throws {
        let config = spool.root + "/spoolfetch.conf"
        try "concurrency = 4\nlog-level = info\n".write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--config", config])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)
        try "concurrency = 9\nlog-level = info\nspool = /elsewhere\n".write(toFile: config, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        try daemon.waitForStderr(containing: "SIGHUP: setting changed", timeout: 10)
        let log = daemon.stderrText
        XCTAssertTrue(log.contains("key=concurrency") && log.contains("new=9"), log)
        // A flag given at start stays on top of the file; a bad file changes nothing.
        try "concurrency = zero\n".write(toFile: config, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        try daemon.waitForStderr(containing: "could not be read again; nothing changed", timeout: 10)
        // Still alive and working.
        server.serve("/after", body: Array("after".utf8))
        try spool.drop("after", "url: \(server.url("/after"))\n")
        try DirectoryWaiter.waitForFile("after.group.done", in: spool.path("final"), timeout: 30)
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText)
    }
}
