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

    /// A drain stops watching once only endings are left, so the kernel's slow teardown of the
    /// watches overlaps the publishing instead of delaying the exit. A request file dropped after
    /// that — here by the item hook, once the daemon holds no inotify descriptor — is found by the
    /// drain's last listing and fetched, and the drain then ends. (The drain goes on while the
    /// hook runs, so it rescans meanwhile; an hour's interval leaves the last listing as the
    /// only way the file can be found.)
    func testARequestDroppedAfterTheDrainStoppedWatchingIsStillFetched() throws {
        server.serve("/first", body: Array("first".utf8))
        server.serve("/second", body: Array("second".utf8))
        try spool.drop("first", "url: \(server.url("/first"))\n")
        let staged = spool.path("tmp", "second.request")
        try "url: \(server.url("/second"))\n".write(toFile: staged, atomically: true, encoding: .utf8)
        let incoming = spool.path("incoming")
        // The hook's parent is the daemon. Its wait is bounded (10 s); without the stop it ends
        // there and the file is seen by the watcher, which the log assertions below catch.
        let hook = """
            case "$SPOOLFETCH_ID" in first*) ;; *) exit 0;; esac
            i=0
            while ls -l /proc/$PPID/fd 2>/dev/null | grep -q 'anon_inode:inotify' && [ $i -lt 1000 ]; do i=$((i+1)); sleep 0.01; done
            cp '\(staged)' '\(incoming)/.second.tmp' && mv '\(incoming)/.second.tmp' '\(incoming)/second'
            """
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--on-item", hook, "--rescan-interval", "3600", "--log-level", "debug"], timeout: 60)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "first"), Array("first".utf8))
        XCTAssertEqual(try spool.read("final", "second"), Array("second".utf8), stderr)
        XCTAssertTrue(stderr.contains("files arrived after the drain stopped watching"), stderr)
        XCTAssertTrue(stderr.contains("the drain stopped watching and goes on"), stderr)
        XCTAssertEqual(spool.files(in: "incoming"), [])
        XCTAssertEqual(Set(spool.files(in: "done")), ["first", "second"])
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
