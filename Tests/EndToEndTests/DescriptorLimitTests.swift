import Foundation
import SpoolTestSupport
import XCTest

/// A daemon under a small open-file limit: finished files that wait for the publisher, and a long
/// list's publish journals, must never use the limit up. Before the open-file budget, a burst of
/// tiny files under the usual 1,024 failed hundreds of items with EMFILE ("Too many open files").
final class DescriptorLimitTests: SpoolTestCase {
    func testManyTinyFilesAndALongListUnderASmallOpenFileLimitAllPublish() throws {
        let singles = 1_500, listed = 1_500, limit = 320
        server.serve("/tiny", body: Array("t".utf8))
        let daemon = try DaemonProcess.launch(openFiles: limit, ["run", "--spool", spool.root, "--concurrency", "32",
                                                                 "--per-host", "32", "--log-level", "notice"])
        defer { daemon.terminate() }
        // The daemon says why it runs fewer transfers than asked (a warning, right after it started).
        try daemon.waitForStderr(containing: "the open-file limit allows fewer transfers than --concurrency", timeout: 30)
        // One list of many items (its journals live until the whole list has ended) ...
        var list = ""
        for i in 0..<listed { list += "url: \(server.url("/tiny"))?l\(i)\nname: l\(i)\n" }
        try spool.drop("long-list", list)
        // ... and many single-file requests, renamed in at once.
        for i in 0..<singles {
            let text = "url: \(server.url("/tiny"))?s\(i)\nname: s\(i)\n"
            _ = FileManager.default.createFile(atPath: spool.path("tmp", "s\(i)"), contents: Data(text.utf8))
        }
        for i in 0..<singles { XCTAssertEqual(rename(spool.path("tmp", "s\(i)"), spool.path("incoming", "s\(i)")), 0) }

        var peak = 0
        let fdFolder = "/proc/\(daemon.pid)/fd"
        try DirectoryWaiter.wait(in: spool.path("done"), timeout: 300, what: "\(singles + 1) requests ended") {
            peak = max(peak, (try? FileManager.default.contentsOfDirectory(atPath: fdFolder).count) ?? 0)
            return self.spool.endedRequestCount() >= singles + 1
        }
        XCTAssertEqual(spool.files(in: "failed"), [], "none failed")
        XCTAssertFalse(daemon.stderrText.contains("Too many open files"), "no open failed for want of descriptors")
        let final = Set(spool.files(in: "final"))
        for i in 0..<singles { XCTAssertTrue(final.contains("s\(i).done"), "s\(i) published") }
        for i in 0..<listed { XCTAssertTrue(final.contains("l\(i).done"), "l\(i) published") }
        XCTAssertTrue(final.contains("long-list.group.done"))
        XCTAssertEqual(spool.files(in: "staging").filter { $0.hasSuffix(".journal") }, [], "every journal removed")
        XCTAssertLessThan(peak, limit)
        print("open-file limit \(limit): \(singles) requests and a \(listed)-URL list published; the daemon's descriptors peaked at \(peak) (sampled)")
    }

    func testGroupHooksWaitingBehindASlowHookHoldNoDescriptorAndEachRunsOnce() throws {
        let count = 400, limit = 300
        server.serve("/tiny", body: Array("t".utf8))
        let gate = spool.path("tmp", "gate"), log = spool.path("tmp", "hooks.log")
        // Every group hook waits for the gate (at most 3 minutes); with --max-hooks 1 the other
        // groups wait their turn.
        let hook = "for i in $(seq 3600); do [ -e '\(gate)' ] && break; sleep 0.05; done; echo \"$SPOOLFETCH_ID\" >> '\(log)'"
        let daemon = try DaemonProcess.launch(openFiles: limit, ["run", "--spool", spool.root, "--on-group", hook,
                                                                 "--max-hooks", "1", "--log-level", "notice"])
        defer { daemon.terminate() }
        // Whatever happens, the waiting hook is let go (it is not the daemon's child once it dies).
        defer { _ = FileManager.default.createFile(atPath: gate, contents: nil) }
        try DirectoryWaiter.waitForFile("active", in: spool.root, timeout: 30)
        for i in 0..<count {
            _ = FileManager.default.createFile(atPath: spool.path("tmp", "g\(i)"),
                                               contents: Data("url: \(server.url("/tiny"))?\(i)\nname: g\(i)\n".utf8))
        }
        for i in 0..<count { XCTAssertEqual(rename(spool.path("tmp", "g\(i)"), spool.path("incoming", "g\(i)")), 0) }
        // Every group ends (its request filed in done/) while the first hook still waits at the gate.
        try DirectoryWaiter.wait(in: spool.path("done"), timeout: 120, what: "\(count) groups ended") {
            self.spool.endedRequestCount() >= count
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/fd").count) ?? -1
        XCTAssertLessThan(open, 100, "\(count - 1) waiting group hooks hold no descriptor each")
        XCTAssertEqual(spool.files(in: "failed"), [])
        XCTAssertEqual(spool.files(in: "staging").filter { $0.hasSuffix(".group") }.count, count, "each hook still to run")

        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 120, what: "every group hook run") {
            self.spool.files(in: "staging").filter { $0.hasSuffix(".group") }.isEmpty
        }
        let ran = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
        XCTAssertEqual(ran.count, count, "each group hook ran once")
        XCTAssertEqual(Set(ran), Set((0..<count).map { "g\($0)" }))
        XCTAssertFalse(daemon.stderrText.contains("Too many open files"))
        print("\(count) group hooks waited behind a slow one with \(open) descriptors open (limit \(limit)); each ran once")
    }
}
