import Foundation
import SpoolTestSupport
import XCTest

/// Space on the paths operators walk (small filesystems on tmpfs mounts the tests make): a body
/// that can never fit fails `disk-full` at once, naming the filesystem and the figures; one that
/// fits once space is freed waits, saying where, and `cancel` ends it; nothing loops silently.
final class SpaceEndsTests: SpoolTestCase {
    private func errorItems(_ name: String) throws -> [[String: Any]] {
        try XCTUnwrap(json("failed", name + ".error")["items"] as? [[String: Any]])
    }

    /// Item `id` as the worker's status report shows it.
    private func statusTask(_ id: String) -> [String: Any]? {
        for name in spool.files(in: "status") where name.hasSuffix(".json") {
            let report = (try? JSONSerialization.jsonObject(with: Data(spool.read("status", name)))) as? [String: Any]
            if let task = (report?["tasks"] as? [[String: Any]])?.first(where: { $0["id"] as? String == id }) { return task }
        }
        return nil
    }

    private func journals(_ spool: TempSpool) -> [String] {
        spool.files(in: "staging").filter { $0.hasPrefix("batch-") && $0.hasSuffix(".journal") }
    }

    func testAFinalFolderTooSmallForTheFileFailsDiskFullAtOnce() throws {
        let small = try TmpfsMount(at: spool.path("final-2m"), size: "2m")
        defer { small.unmount() }
        server.serve("/three", body: TestBody.random(count: 3_000_000, seed: 1))
        try spool.drop("three", "url: \(server.url("/three"))\n")
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--final-folder", small.path], timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30, "no retry loop")
        let item = try XCTUnwrap(errorItems("three").first)
        XCTAssertEqual(item["code"] as? String, "disk-full")
        let message = item["message"] as? String ?? ""
        XCTAssertTrue(message.contains(small.path), message)
        XCTAssertTrue(message.contains("free now"), "cut at its headers, before a write met ENOSPC: \(message)")
        XCTAssertTrue(message.contains("3000000 bytes can never fit on \(small.path) (tmpfs at \(small.path)): 2097152 bytes in all"), message)
        XCTAssertEqual(server.requests(for: "/three").count, 1)
        XCTAssertEqual(journals(spool), [], "no journal left behind")
        XCTAssertFalse(stderr.contains("will try again"), stderr)
    }

    func testAPublishThatFitsOnceSpaceIsFreedWaitsNamingTheFinalFolderAndCancelEndsIt() throws {
        let final = try TmpfsMount(at: spool.path("final-4m"), size: "4m")
        defer { final.unmount() }
        XCTAssertTrue(FileManager.default.createFile(atPath: final.path + "/taken", contents: Data(count: 2_500_000)))
        // Chunked, without a length: a body whose headers give its size is held back at its first
        // byte when the final folder cannot take it now (SpaceAtFirstByteTests); one without a
        // length is fetched, and it is its publish that waits.
        server.serve("/a", body: TestBody.random(count: 3_000_000, seed: 2), script: [.chunked])
        server.serve("/b", body: TestBody.random(count: 3_000_000, seed: 3), script: [.chunked])
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--final-folder", final.path])
        defer { daemon.terminate() }

        try spool.drop("a", "url: \(server.url("/a"))\n")
        try daemon.waitForStderr(containing: "waiting for disk space to publish", timeout: 30)
        let line = daemon.stderrText.split(separator: "\n").first { $0.contains("waiting for disk space to publish") } ?? ""
        XCTAssertTrue(line.contains("path=\(final.path)"), String(line))
        XCTAssertTrue(line.contains("filesystem=\"tmpfs at \(final.path)\""), String(line))
        XCTAssertTrue(line.contains("level=warning") || line.contains("warning"), String(line))
        XCTAssertLessThanOrEqual(journals(spool).count, 1, "one journal for the batch, none per try")
        // The status report says the same: the item waits for space, on that filesystem.
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "a#0 shown waiting for space on the final folder") {
            guard let task = self.statusTask("a#0") else { return false }
            let waits = task["waitingFor"] as? String ?? ""
            return task["state"] as? String == "waiting-space" && waits.contains("\(final.path) (tmpfs at \(final.path))")
        }

        let cancelled = try DaemonProcess.launch(["cancel", "a", "--spool", spool.root])
        XCTAssertEqual(try cancelled.waitForExit(timeout: 30), 0, cancelled.stderrText + cancelled.stdoutText)
        try DirectoryWaiter.waitForFile("a", in: spool.path("failed"), timeout: 30)
        XCTAssertEqual(try errorItems("a").first?["code"] as? String, "cancelled")

        try spool.drop("b", "url: \(server.url("/b"))\n")
        try daemon.waitForStderr(timeout: 30, what: "b waiting for space") { text in
            text.split(separator: "\n").contains { $0.contains("waiting for disk space to publish") && $0.contains("b#0") }
        }
        try FileManager.default.removeItem(atPath: final.path + "/taken")
        try DirectoryWaiter.waitForFile("b.done", in: final.path, timeout: 30)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: final.path + "/b")), Data(TestBody.random(count: 3_000_000, seed: 3)))
        XCTAssertEqual(server.requests(for: "/b").count, 1, "published from its verified part, not fetched again")
    }

    func testABodyLargerThanTheSpoolsFilesystemFailsDiskFullAtOnce() throws {
        let small = try TmpfsMount(at: spool.path("spool-8m"), size: "8m")
        defer { small.unmount() }
        let tiny = try TempSpool(root: small.path + "/spool")
        server.serve("/twenty", body: TestBody.random(count: 20_000_000, seed: 4))
        try tiny.drop("twenty", "url: \(server.url("/twenty"))\n")
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: tiny.root, timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30, "no wait that could never end")
        let error = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(tiny.read("failed", "twenty.error"))) as? [String: Any])
        let item = try XCTUnwrap((error["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(item["code"] as? String, "disk-full")
        let message = item["message"] as? String ?? ""
        XCTAssertTrue(message.contains("20000000 bytes can never fit on \(tiny.root)/staging"), message)
        XCTAssertTrue(message.contains("8388608 bytes in all"), message)
        XCTAssertEqual(tiny.files(in: "staging").filter { $0.hasSuffix(".part") }, [], "the partial is removed")
    }
}
