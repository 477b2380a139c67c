import Foundation
import SpoolTestSupport
import XCTest

/// Spools and final folders on the filesystems users put them on: a FUSE filesystem without
/// rename flags, size or `syncfs` (`Tests/FUSE/powercutfs.py`), with a simulated power cut; and a
/// final folder on another filesystem than the spool. These need root (mounts); without root or
/// /dev/fuse they fail and say why, they never pass silently.
final class FilesystemTests: SpoolTestCase {
    /// Items published so far, by final name: their bodies.
    private var expected: [String: [UInt8]] = [:]
    /// Request files dropped so far, by name: their text.
    private var dropped: [String: String] = [:]
    /// Request files expected in failed/ (beside their `.error`), by name: their text.
    private var failing: [String: String] = [:]

    private func item(_ name: String, size: Int, seed: UInt64, script: [ResponseBehavior] = [.normal]) -> String {
        let body = TestBody.random(count: size, seed: seed)
        expected[name] = body
        server.serve("/f/" + name, body: body, etag: "\"\(seed)\"", script: script)
        return "url: \(server.url("/f/" + name))\nname: \(name)\nsha256: \(TestBody.sha256Hex(body))\n"
    }

    private func drop(_ spool: TempSpool, _ name: String, _ text: String) throws {
        dropped[name] = text
        try spool.drop(name, text)
    }

    /// Every expected item has a marker that describes a complete, hash-matching file; no file the
    /// state table relies on is empty; every request file is in done/ with its text.
    private func assertEverythingPublished(_ spool: TempSpool, final: String? = nil, _ context: String,
                                           file: StaticString = #filePath, line: UInt = #line) throws {
        let finalFolder = final ?? spool.path("final")
        for (name, body) in expected.sorted(by: { $0.key < $1.key }) {
            let markerData = try XCTUnwrap(FileManager.default.contents(atPath: finalFolder + "/" + name + ".done"),
                                           "\(context): \(name).done is missing", file: file, line: line)
            let marker = try XCTUnwrap(try? JSONSerialization.jsonObject(with: markerData) as? [String: Any],
                                       "\(context): \(name).done is not JSON (\(markerData.count) bytes)", file: file, line: line)
            XCTAssertEqual(marker["name"] as? String, name, context, file: file, line: line)
            XCTAssertEqual(marker["bytes"] as? Int, body.count, "\(context): \(name)", file: file, line: line)
            XCTAssertEqual(marker["sha256"] as? String, TestBody.sha256Hex(body), "\(context): \(name)", file: file, line: line)
            let data = FileManager.default.contents(atPath: finalFolder + "/" + name).map { [UInt8]($0) }
            XCTAssertEqual(data?.count, body.count, "\(context): \(name) has the marker's size", file: file, line: line)
            XCTAssertTrue(data == body, "\(context): \(name) has the marker's content", file: file, line: line)
        }
        for (name, text) in failing {
            XCTAssertEqual(String(decoding: try spool.read("failed", name), as: UTF8.self), text,
                           "\(context): the request file \(name) is in failed/, intact", file: file, line: line)
            let record = try XCTUnwrap(try? JSONSerialization.jsonObject(with: Data(spool.read("failed", name + ".error"))) as? [String: Any],
                                       "\(context): failed/\(name).error is missing or not JSON", file: file, line: line)
            XCTAssertEqual(record["code"] as? String, "items-failed", context, file: file, line: line)
        }
        for (name, text) in dropped where failing[name] == nil {
            XCTAssertEqual(String(decoding: try spool.read("done", name), as: UTF8.self), text,
                           "\(context): the request file \(name) is in done/, intact", file: file, line: line)
            let group = try XCTUnwrap(FileManager.default.contents(atPath: finalFolder + "/" + name + ".group.done"),
                                      "\(context): \(name).group.done is missing", file: file, line: line)
            XCTAssertNotNil(try? JSONSerialization.jsonObject(with: group), "\(context): \(name).group.done is JSON",
                            file: file, line: line)
        }
        for folder in [finalFolder, spool.path("done"), spool.path("failed"), spool.path("rejected")] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            where !name.hasPrefix(".") && expected[name]?.isEmpty != true {
                let size = (try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)[.size] as? Int) ?? -1
                XCTAssertGreaterThan(size, 0, "\(context): \(folder)/\(name) is empty", file: file, line: line)
            }
        }
        XCTAssertEqual(spool.files(in: "failed"), failing.keys.flatMap { [$0, $0 + ".error"] }.sorted(), context, file: file, line: line)
        XCTAssertEqual(spool.files(in: "incoming"), [], context, file: file, line: line)
        XCTAssertEqual(spool.leftovers(in: "active"), [], context, file: file, line: line)
    }

    func testDrainOnAFUSESpoolPublishesEverythingSurvivesAPowerCutAndARestartFinishes() throws {
        let scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-fuse")
        let fs = try PowerCutMount(in: scratch)
        defer {
            try? fs.unmount()
            if ProcessInfo.processInfo.environment["SPOOLFETCH_KEEP_TEST_DIRS"] == nil {
                try? FileManager.default.removeItem(atPath: scratch)
            }
        }
        let fuseSpool = try TempSpool(root: fs.mountPoint + "/spool")
        let hookLog = scratch + "/hooks.log"
        let hook = ["--on-group", "echo \"$SPOOLFETCH_GROUP\" >> '\(hookLog)'"]

        // Single items, a small batch (two: the per-file path), a large batch (the batched path,
        // with a body large enough to start writeback while it downloads), a group hook.
        for i in 0..<3 { try drop(fuseSpool, "single\(i)", item("s\(i).bin", size: 10_000 + i * 3_000, seed: UInt64(i + 1))) }
        try drop(fuseSpool, "pair", item("p0.bin", size: 5_000, seed: 20) + item("p1.bin", size: 70_000, seed: 21))
        try drop(fuseSpool, "many", (0..<12).map { item("m\($0).bin", size: $0 == 5 ? 9 << 20 : 2_000 + $0 * 997, seed: UInt64(30 + $0)) }.joined())
        // And one that fails (its error file must survive the cut too).
        let broken = "url: \(server.url("/missing"))\nname: never.bin\n"
        failing["broken"] = broken
        try drop(fuseSpool, "broken", broken)
        let (status, stderr) = try DaemonProcess.drain(spool: fuseSpool.root, extra: hook + ["--log-level", "info"], timeout: 120)
        XCTAssertEqual(status, 1, "one request failed:\n\(stderr)")
        XCTAssertTrue(stderr.contains("renames out of incoming/ use link+unlink"), "the method is logged once at start:\n\(stderr)")
        XCTAssertTrue(stderr.contains("space reservation is off for \(fuseSpool.path("staging"))"), stderr)
        try assertEverythingPublished(fuseSpool, "after the drain")
        XCTAssertEqual(try String(contentsOfFile: hookLog, encoding: .utf8).split(separator: "\n").sorted(),
                       ["broken", "many", "pair", "single0", "single1", "single2"], "one group hook per request file")

        try fs.powerCut()
        try assertEverythingPublished(fuseSpool, "after the power cut")

        // A worker killed with work in flight, then the power cut, then a restart.
        try drop(fuseSpool, "late", item("l0.bin", size: 3_000, seed: 50) + item("l1.bin", size: 4_000, seed: 51)
                 + item("lslow.bin", size: 3 << 19, seed: 52, script: [.slow(chunkSize: 32 << 10, interval: .milliseconds(30)), .normal]))
        let daemon = try DaemonProcess.launch(["run", "--spool", fuseSpool.root, "--log-level", "info"] + hook)
        try DirectoryWaiter.wait(in: fuseSpool.path("final"), timeout: 60, what: "l0 and l1 published") {
            FileManager.default.fileExists(atPath: fuseSpool.path("final", "l0.bin.done"))
                && FileManager.default.fileExists(atPath: fuseSpool.path("final", "l1.bin.done"))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: fuseSpool.path("final", "lslow.bin.done")), "the slow one is still running")
        daemon.signal(SIGKILL)
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 128 + SIGKILL)
        try fs.powerCut()
        let restart = try DaemonProcess.drain(spool: fuseSpool.root, extra: hook, timeout: 120)
        XCTAssertEqual(restart.status, 0, "the restart only finishes the late request:\n\(restart.stderr)")
        try assertEverythingPublished(fuseSpool, "after the restart")
        XCTAssertEqual(server.requests(for: "/f/l0.bin").count, 1, "a file published before the cut is not fetched again")
        XCTAssertEqual(fuseSpool.files(in: "final").filter { $0.hasPrefix("l0") || $0.hasPrefix("lslow") },
                       ["l0.bin", "l0.bin.done", "lslow.bin", "lslow.bin.done"], "and nothing is published twice")
        try fs.powerCut()
        try assertEverythingPublished(fuseSpool, "after a second power cut")
    }

    func testFinalFolderOnTmpfsBesideADiskSpool() throws {
        let tmpfs = try TmpfsMount(at: spool.path("final-tmpfs"))
        defer { tmpfs.unmount() }
        try drop(spool, "across", item("a0.bin", size: 1_000, seed: 60) + item("a1.bin", size: 3 << 20, seed: 61)
                 + item("a2.bin", size: 0, seed: 62))
        try drop(spool, "across-batch", (0..<5).map { item("b\($0).bin", size: 500 + $0 * 4_000, seed: UInt64(70 + $0)) }.joined())
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--final-folder", tmpfs.path, "--min-free", "1M"], timeout: 60)
        XCTAssertEqual(status, 0, stderr)
        try assertEverythingPublished(spool, final: tmpfs.path, "final folder on tmpfs")
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "the copies replaced the parts")
    }

    func testAFinalFolderOnASmallFilesystemDrainsWithTheDefaultMinFree() throws {
        // 64 MiB in all: a fixed 64 MiB min-free could never be met there; the default is 5 % of it.
        let tmpfs = try TmpfsMount(at: spool.path("final-small"), size: "64m")
        defer { tmpfs.unmount() }
        try drop(spool, "small-final", (0..<50).map { item("s\($0).bin", size: 256 << 10, seed: UInt64(300 + $0)) }.joined())
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--final-folder", tmpfs.path], timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        try assertEverythingPublished(spool, final: tmpfs.path, "final folder on a 64 MiB tmpfs")
    }

    func testAMinFreeThatCanNeverBeMetIsAStartErrorNamingTheFilesystem() throws {
        let tmpfs = try TmpfsMount(at: spool.path("final-tiny"), size: "8m")
        defer { tmpfs.unmount() }
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--final-folder", tmpfs.path, "--min-free", "64M"],
                                                       timeout: 60)
        XCTAssertEqual(status, 3, stderr)
        XCTAssertTrue(stderr.contains("min-free 67108864 can never be met on \(tmpfs.path) (tmpfs at \(tmpfs.path)"), stderr)
    }

    func testASpaceWaitNamesTheFilesystemItWaitsOn() throws {
        // An item that fits the final folder's filesystem only once space is freed waits, and
        // the log says where: the tmpfs, with its free space, not the staging disk's.
        let tmpfs = try TmpfsMount(at: spool.path("final-wait"), size: "8m")
        defer { tmpfs.unmount() }
        XCTAssertTrue(FileManager.default.createFile(atPath: tmpfs.path + "/taken", contents: Data(count: 5 << 20)))
        server.serve("/big", body: TestBody.random(count: 1_000, seed: 5))
        try spool.drop("later", "url: \(server.url("/big"))\nexpected-bytes: 6M\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--final-folder", tmpfs.path])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "waiting for disk space", timeout: 30)
        let line = daemon.stderrText.split(separator: "\n").first { $0.contains("waiting for disk space") } ?? ""
        XCTAssertTrue(line.contains("path=\(tmpfs.path)"), String(line))
        XCTAssertTrue(line.contains("filesystem=\"tmpfs at \(tmpfs.path)\""), String(line))
        XCTAssertTrue(line.contains("min-free=419430"), "5 % of 8 MiB: \(line)")
        XCTAssertEqual(server.requests(for: "/big").count, 0)
        // The way out is its condition: space freed, the item runs and is published.
        try FileManager.default.removeItem(atPath: tmpfs.path + "/taken")
        try DirectoryWaiter.waitForFile("big.done", in: tmpfs.path, timeout: 30)
        XCTAssertEqual(server.requests(for: "/big").count, 1)
    }

    func testABodyThatCanNeverFitItsFilesystemFailsAtOnceNamingIt() throws {
        // Expected to be larger than the final folder's whole filesystem: no wait that could
        // never end, and no request sent; the failure names the filesystem and the figures.
        let tmpfs = try TmpfsMount(at: spool.path("final-small"), size: "8m")
        defer { tmpfs.unmount() }
        server.serve("/big", body: TestBody.random(count: 1_000, seed: 5))
        try spool.drop("too-big", "url: \(server.url("/big"))\nexpected-bytes: 20M\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--final-folder", tmpfs.path], timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        let error = try String(contentsOfFile: spool.path("failed/too-big.error"), encoding: .utf8)
        XCTAssertTrue(error.contains("\"code\":\"disk-full\""), error)
        XCTAssertTrue(error.contains("can never fit on \(tmpfs.path) (tmpfs at \(tmpfs.path))"), error)
        XCTAssertTrue(error.contains("8388608 bytes in all"), error)
        XCTAssertEqual(server.requests(for: "/big").count, 0)
    }

    func testSpoolOnTmpfsWithTheFinalFolderOnDisk() throws {
        let tmpfs = try TmpfsMount(at: spool.path("spool-tmpfs"))
        defer { tmpfs.unmount() }
        let tmpfsSpool = try TempSpool(root: tmpfs.path + "/spool")
        let final = spool.path("final-disk")
        try drop(tmpfsSpool, "across", item("c0.bin", size: 2_000, seed: 80) + item("c1.bin", size: 2 << 20, seed: 81))
        let (status, stderr) = try DaemonProcess.drain(spool: tmpfsSpool.root, extra: ["--final-folder", final, "--min-free", "1M"], timeout: 60)
        XCTAssertEqual(status, 0, stderr)
        try assertEverythingPublished(tmpfsSpool, final: final, "spool on tmpfs, final folder on disk")
    }

    func testAFinalFolderThatRefusesWritesFailsTheItemAtOnceAndTheDrainExitsOne() throws {
        let readOnly = try TmpfsMount(at: spool.path("final-ro"), size: "1m", readOnly: true)
        defer { readOnly.unmount() }
        try spool.drop("blocked", item("x.bin", size: 1_000, seed: 90))
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--final-folder", readOnly.path, "--min-free", "0"],
                                                       timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "a permanent error is not retried every 5 s")
        XCTAssertTrue(stderr.contains("publishing failed and cannot succeed by retrying"), stderr)
        XCTAssertTrue(stderr.contains("Read-only file system"), stderr)
        // Its group marker cannot be written either: the request waits in active/ for a run
        // after the folder was fixed.
        XCTAssertTrue(stderr.contains("could not end the group, and retrying cannot help"), stderr)
        XCTAssertEqual(spool.claimed(), ["blocked"])
        XCTAssertEqual(spool.files(in: "incoming"), [])
    }

    func testARequestThatCannotBeClaimedMakesTheDrainExitOne() throws {
        // active/ on another filesystem: the claim's rename fails with EXDEV.
        let elsewhere = try TmpfsMount(at: spool.path("active"), size: "1m")
        defer { elsewhere.unmount() }
        try spool.drop("stuck", item("y.bin", size: 1_000, seed: 91))
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--min-free", "0"], timeout: 60)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(stderr.contains("could not claim a request file"), stderr)
        XCTAssertEqual(spool.files(in: "incoming"), ["stuck"], "it stays queued")
        XCTAssertEqual(server.requests(for: "/f/y.bin").count, 0)
    }
}
