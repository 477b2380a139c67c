import Foundation
import SpoolTestSupport
import XCTest

/// The content store after `kill -9` and power cuts: never an entry whose bytes do not hash to its
/// name, never a published file whose bytes are not its marker's, and everything delivered in the end.
final class ContentStoreCrashTests: SpoolTestCase {
    /// Every entry of the store under `root` hashes to its name; returns how many there are.
    @discardableResult
    private func checkEntries(_ root: String, _ context: String, file: StaticString = #filePath, line: UInt = #line) -> Int {
        let objects = root + "/store/sha256"
        var count = 0
        for shard in (try? FileManager.default.contentsOfDirectory(atPath: objects)) ?? [] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: objects + "/" + shard)) ?? [] {
                let bytes = Array((try? Data(contentsOf: URL(fileURLWithPath: objects + "/" + shard + "/" + name))) ?? Data())
                XCTAssertEqual(TestBody.sha256Hex(bytes), name, "\(context): entry \(shard)/\(name) (\(bytes.count) bytes)", file: file, line: line)
                XCTAssertTrue(name.hasPrefix(shard), context, file: file, line: line)
                count += 1
            }
        }
        return count
    }

    /// Every marker in `final/` describes its file's bytes.
    private func checkPublished(_ spool: TempSpool, _ context: String, file: StaticString = #filePath, line: UInt = #line) {
        for name in spool.files(in: "final") where name.hasSuffix(".done") && !name.hasSuffix(".group.done") {
            guard let data = try? spool.read("final", name),
                  let marker = try? JSONSerialization.jsonObject(with: Data(data)) as? [String: Any] else {
                XCTFail("\(context): \(name) is not a marker", file: file, line: line)
                continue
            }
            let published = (try? spool.read("final", String(name.dropLast(5)))) ?? []
            XCTAssertEqual(TestBody.sha256Hex(published), marker["sha256"] as? String, "\(context): \(name)", file: file, line: line)
        }
    }

    /// Rounds of `kill -9` at a different point each time (after 1, 3, 5, … markers), a restart
    /// adopting what the killed worker left. Bounded: 6 rounds, each waiting at most 30 s.
    func testKill9RoundsLeaveOnlyEntriesThatHashToTheirNames() throws {
        let bodies = (0..<8).map { TestBody.random(count: 40_000 + $0 * 50_000, seed: UInt64(60 + $0)) }
        for (i, body) in bodies.enumerated() {
            server.serve("/k\(i)", body: body, script: [.slow(chunkSize: 16_000, interval: .milliseconds(20))])
        }
        var text = ""
        for n in 0..<40 {
            let i = n % bodies.count
            text += "url: \(server.url("/k\(i)"))\nname: f\(n)\nsha256: \(TestBody.sha256Hex(bodies[i]))\n"
        }
        try spool.drop("kills", text)
        var killedMidway = 0
        for round in 0..<6 {
            let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--store", "yes", "--adopt-interval", "0",
                                                   "--concurrency", "4"])
            let markers = spool.files(in: "final").filter { $0.hasSuffix(".done") }.count
            let target = min(40, markers + 1 + round * 2)
            // Until the round's marker count, or the request's group end.
            try DirectoryWaiter.wait(in: spool.path("final"), timeout: 30, what: "round \(round): \(target) markers") {
                spool.files(in: "final").filter { $0.hasSuffix(".done") && !$0.hasSuffix(".group.done") }.count >= target
                    || spool.files(in: "done").contains("kills")
            }
            if spool.files(in: "done").contains("kills") { daemon.terminate(); break }
            daemon.signal(SIGKILL)
            XCTAssertEqual(try daemon.waitForExit(timeout: 10), 128 + SIGKILL)
            killedMidway += 1
            checkEntries(spool.root, "after kill \(round)")
            checkPublished(spool, "after kill \(round)")
        }
        XCTAssertGreaterThanOrEqual(killedMidway, 3, "the kills fell while the request was still being worked on")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", "yes"], timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        for n in 0..<40 { XCTAssertEqual(try spool.read("final", "f\(n)"), bodies[n % bodies.count], "f\(n)") }
        XCTAssertEqual(checkEntries(spool.root, "at the end"), bodies.count)
        checkPublished(spool, "at the end")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.root + "/store/claims"), [], "no claim left")
    }

    /// On a filesystem that drops every unsynced byte at a power cut (`PowerCutMount`): a worker
    /// killed while it ingests and publishes from the store, then the power cut, then a drain, then
    /// another cut: every entry still hashes to its name, every marker describes its file.
    func testPowerCutsDuringIngestAndPublishFromTheStoreLeaveOnlyWholeEntries() throws {
        let scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-fuse-store")
        let fs = try PowerCutMount(in: scratch)
        defer {
            try? fs.unmount()
            if ProcessInfo.processInfo.environment["SPOOLFETCH_KEEP_TEST_DIRS"] == nil {
                try? FileManager.default.removeItem(atPath: scratch)
            }
        }
        let fuseSpool = try TempSpool(root: fs.mountPoint + "/spool")
        let bodies = (0..<4).map { TestBody.random(count: 300_000 + $0 * 100_000, seed: UInt64(70 + $0)) }
        for (i, body) in bodies.enumerated() {
            server.serve("/p\(i)", body: body, script: [.slow(chunkSize: 64_000, interval: .milliseconds(10))])
        }
        var text = ""
        for n in 0..<12 {
            text += "url: \(server.url("/p\(n % 4)"))\nname: g\(n)\nsha256: \(TestBody.sha256Hex(bodies[n % 4]))\n"
        }
        try fuseSpool.drop("cuts", text)
        let first = try DaemonProcess.launch(["run", "--spool", fuseSpool.root, "--store", "yes", "--adopt-interval", "0"])
        try first.waitForStderr(containing: "spoolfetch running", timeout: 30)
        // Killed once the first entry is in and some item was published from it.
        try DirectoryWaiter.wait(in: fuseSpool.path("final"), timeout: 60, what: "a marker with source store") {
            fuseSpool.files(in: "final").contains { name in
                name.hasSuffix(".done") && (try? fuseSpool.read("final", name)).map { String(decoding: $0, as: UTF8.self).contains("\"source\":\"store\"") } == true
            }
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        try fs.powerCut()
        checkEntries(fuseSpool.root, "after the kill and the power cut")
        checkPublished(fuseSpool, "after the kill and the power cut")
        let (status, stderr) = try DaemonProcess.drain(spool: fuseSpool.root, extra: ["--store", "yes"], timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        try fs.powerCut()
        XCTAssertEqual(checkEntries(fuseSpool.root, "after the drain and a second power cut"), 4)
        checkPublished(fuseSpool, "after the drain and a second power cut")
        for n in 0..<12 { XCTAssertEqual(try fuseSpool.read("final", "g\(n)"), bodies[n % 4], "g\(n)") }
    }
}
