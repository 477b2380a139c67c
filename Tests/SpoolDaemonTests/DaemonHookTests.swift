import Foundation
import SpoolTestSupport
import XCTest

/// Hooks through the real daemon: a hook cannot hold a drain past its time limit, and what it
/// prints arrives as log lines naming the item.
final class DaemonHookTests: SpoolTestCase {
    func testAHookThatSleepsPastItsLimitIsKilledAndTheDrainEnds() throws {
        server.serve("/h", body: Array("hook".utf8))
        try spool.drop("hooked", server.url("/h") + "\n")
        let clock = ContinuousClock()
        let started = clock.now
        // The hook prints a line, then sleeps in a child of its shell: both must die.
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--on-item", "echo \"ending $SPOOLFETCH_ID at $SPOOLFETCH_PATH\"; sleep 60; echo never",
            "--hook-timeout", "1", "--max-hooks", "2"], timeout: 40)
        let elapsed = started.duration(to: clock.now)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertLessThan(elapsed, .seconds(30), "the 60 s hook did not hold the drain:\n\(stderr)")
        let lines = stderr.split(separator: "\n").map(String.init)
        let killed = try XCTUnwrap(lines.first { $0.contains("msg=\"hook killed past its time limit\"") }, stderr)
        XCTAssertTrue(killed.contains("level=error") && killed.contains("item=hooked#0") && killed.contains("hook-timeout=1"), killed)
        let said = try XCTUnwrap(lines.first { $0.contains("msg=\"hook output\"") }, stderr)
        XCTAssertTrue(said.contains("item=hooked#0") && said.contains("stream=stdout"), said)
        XCTAssertTrue(said.contains("line=\"ending hooked#0 at /"), "an absolute path: \(said)")
        XCTAssertFalse(stderr.contains("line=never"), "the hook went on after its limit:\n\(stderr)")
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("time=") }, "nothing raw between log lines:\n\(stderr)")
        XCTAssertTrue(spool.files(in: "final").contains("h.done"))
    }
}
