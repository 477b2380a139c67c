import Foundation
import SpoolTestSupport
import XCTest

/// A spool on a filesystem written from other machines (NFS, CIFS, most FUSE): inotify sees only
/// this kernel's changes there, so `--inotify no` runs on rescans alone.
final class SharedSpoolTests: SpoolTestCase {
    /// The kinds of the daemon's open descriptors (`anon_inode:inotify`, `socket:[…]`, paths).
    private func descriptorTargets(of pid: Int32) -> [String] {
        let fds = "/proc/\(pid)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: fds)) ?? []
        return names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: fds + "/" + $0) }
    }

    func testWithoutInotifyARescanFindsTheRequestAndNoInotifyDescriptorIsOpen() throws {
        let body = TestBody.random(count: 12_000, seed: 71)
        server.serve("/shared", body: body)
        let final = spool.path("final")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root,
                                               "--inotify", "no", "--rescan-interval", "0.5"])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)
        XCTAssertFalse(descriptorTargets(of: daemon.pid).contains { $0.contains("inotify") },
                       "\(descriptorTargets(of: daemon.pid))")

        try spool.drop("shared", server.url("/shared") + "\n")
        try DirectoryWaiter.waitForFile("shared.done", in: final, timeout: 30)
        XCTAssertEqual(try spool.read("final", "shared"), body)
        XCTAssertEqual(server.requests(for: "/shared").count, 1)
    }

    func testWithInotifyTheDaemonHoldsAnInotifyDescriptor() throws {
        // The counterpart of the test above, so that its check can fail.
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)
        XCTAssertTrue(descriptorTargets(of: daemon.pid).contains { $0.contains("inotify") },
                      "\(descriptorTargets(of: daemon.pid))")
    }

    func testNoInotifyWithoutARescanIntervalIsABadConfiguration() throws {
        let result = try DaemonProcess.drain(spool: spool.root, extra: ["--inotify", "no"])
        XCTAssertEqual(result.status, 3, result.stderr)
        XCTAssertTrue(result.stderr.contains("--inotify no needs --rescan-interval"), result.stderr)
    }

    func testInotifyTakesOnlyYesOrNo() throws {
        let result = try DaemonProcess.drain(spool: spool.root, extra: ["--inotify", "maybe"])
        XCTAssertEqual(result.status, 64, result.stderr)
        XCTAssertTrue(result.stderr.contains("inotify must be yes or no, got 'maybe'"), result.stderr)
    }
}
