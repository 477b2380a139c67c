import Foundation
import SpoolTestSupport
import XCTest

/// The core path, end to end: the real `spoolfetch` executable on a fresh spool against an
/// in-process HTTP server on 127.0.0.1, driven the way a cron job drives it.
final class CorePathTests: SpoolTestCase {
    func testURLListAndOneItemRequestArePublishedWithMarkers() throws {
        var bodies: [String: [UInt8]] = [:]
        var list = ""
        for i in 1...5 {
            let body = TestBody.random(count: 1000 * i + 17, seed: UInt64(i))
            bodies["f\(i).bin"] = body
            server.serve("/data/f\(i).bin", body: body, etag: "\"e\(i)\"")
            list += server.url("/data/f\(i).bin") + "\n"
        }
        let special = TestBody.random(count: 300_000, seed: 99)
        server.serve("/x/blob", body: special)
        try spool.drop("list", list)
        try spool.drop("one", """
            url: \(server.url("/x/blob"))
            name: special.dat
            sha256: \(TestBody.sha256Hex(special))
            """)

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)

        for (name, body) in bodies {
            XCTAssertEqual(try spool.read("final", name), body, "\(name) must be byte-identical")
            let marker = try json("final", name + ".done")
            XCTAssertEqual(marker["request"] as? String, "list")
            XCTAssertEqual(marker["bytes"] as? Int, body.count)
            XCTAssertEqual(marker["sha256"] as? String, TestBody.sha256Hex(body))
            XCTAssertEqual(marker["httpStatus"] as? Int, 200)
            XCTAssertNotNil(marker["etag"] as? String)
            XCTAssertNotNil(marker["startedAt"] as? String)
            XCTAssertEqual(marker["attempts"] as? Int, 1)
        }
        XCTAssertEqual(try spool.read("final", "special.dat"), special)
        XCTAssertEqual(try json("final", "special.dat.done")["sha256"] as? String, TestBody.sha256Hex(special))

        let listGroup = try json("final", "list.group.done")
        XCTAssertEqual(listGroup["published"] as? Int, 5)
        XCTAssertEqual(listGroup["failed"] as? Int, 0)
        XCTAssertEqual((listGroup["items"] as? [[String: Any]])?.count, 5)
        XCTAssertEqual(try json("final", "one.group.done")["published"] as? Int, 1)

        XCTAssertEqual(spool.files(in: "incoming"), [])
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
        XCTAssertEqual(spool.leftovers(in: "active"), [])
        XCTAssertTrue(spool.files(in: "done").contains("list"), "the request file ends in done/")
        XCTAssertTrue(spool.files(in: "done").contains("one"))
        XCTAssertEqual(spool.files(in: "done").filter { $0.hasPrefix(".") }, [], "no temp files left")
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix(".") }, [], "no temp files left")
    }

    func testDefaultsBeforeTheFirstURLApplyToEveryItemAndItemsOverride() throws {
        server.serve("/a", body: Array("alpha".utf8))
        server.serve("/b", body: Array("beta".utf8))
        try spool.drop("defaults", """
            # defaults for every item
            header: X-Token: shared
            group: batch7
            \(server.url("/a"))
            url: \(server.url("/b"))
            header: X-Token: own
            name: b.txt
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/a").first?.header("X-Token"), "shared")
        XCTAssertEqual(server.requests(for: "/b").first?.header("X-Token"), "own")
        XCTAssertEqual(try spool.read("final", "a"), Array("alpha".utf8))
        XCTAssertEqual(try spool.read("final", "b.txt"), Array("beta".utf8))
        let group = try json("final", "batch7.group.done")
        XCTAssertEqual(group["group"] as? String, "batch7")
        XCTAssertEqual(group["published"] as? Int, 2)
    }

    func testSha256MismatchFailsTheItemAndPublishesNothing() throws {
        let body = TestBody.random(count: 4096, seed: 5)
        server.serve("/good", body: body)
        server.serve("/bad", body: body)
        try spool.drop("check", """
            url: \(server.url("/good"))
            sha256: \(TestBody.sha256Hex(body))
            url: \(server.url("/bad"))
            sha256: \(String(repeating: "ab", count: 32))
            """)
        let (status, _) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, "a failed item makes the drain exit 1")
        XCTAssertEqual(try spool.read("final", "good"), body)
        XCTAssertFalse(spool.files(in: "final").contains("bad"), "a mismatching body is never published")
        XCTAssertEqual(spool.files(in: "failed"), ["check", "check.error"])
        let error = try json("failed", "check.error")
        let items = try XCTUnwrap(error["items"] as? [[String: Any]])
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(items[0]["code"] as? String, "sha256-mismatch")
        XCTAssertEqual(items[0]["url"] as? String, server.url("/bad"))
        let group = try json("final", "check.group.done")
        XCTAssertEqual(group["published"] as? Int, 1)
        XCTAssertEqual(group["failed"] as? Int, 1)
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }

    func testNotFoundFailsWithTheStatusInTheReason() throws {
        try spool.drop("missing", server.url("/nothing-here") + "\n")
        let (status, _) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1)
        let error = try json("failed", "missing.error")
        let item = try XCTUnwrap((error["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(item["code"] as? String, "http-status")
        XCTAssertEqual(item["httpStatus"] as? Int, 404)
        XCTAssertTrue((item["message"] as? String ?? "").contains("404"))
        XCTAssertEqual(item["attempts"] as? Int, 1, "a 404 is permanent: no retry")
        XCTAssertEqual(server.requests(for: "/nothing-here").count, 1)
    }

    func testRedirectIsFollowedAndTheFinalURLRecorded() throws {
        let body = TestBody.random(count: 2048, seed: 8)
        server.serve("/final/file.bin", body: body)
        server.serve("/start", body: [], script: [.redirect(to: "/middle", code: 301)])
        server.serve("/middle", body: [], script: [.redirect(to: server.url("/final/file.bin"))])
        try spool.drop("redir", "url: \(server.url("/start"))\nname: r.bin\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "r.bin"), body)
        let marker = try json("final", "r.bin.done")
        XCTAssertEqual(marker["url"] as? String, server.url("/start"))
        XCTAssertEqual(marker["finalURL"] as? String, server.url("/final/file.bin"))
    }

    func testRequestFileWrittenSlowlyIsNotReadBeforeItIsClosed() throws {
        server.serve("/slow1", body: Array("one".utf8))
        server.serve("/slow2", body: Array("two".utf8))
        server.serve("/probe", body: Array("probe".utf8))
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }

        // A producer that writes straight into incoming/, slowly: first line now, the rest later.
        // (open(2) directly: FileManager.createFile would close the file once, which is a finished write.)
        let fd = open(spool.path("incoming", "slow"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        handle.write(Data((server.url("/slow1") + "\n").utf8))

        // A complete request dropped after it: once its marker exists, the daemon has seen every
        // event that came before, and must still not have touched the open file.
        try spool.drop("probe", server.url("/probe") + "\n")
        try DirectoryWaiter.waitForFile("probe.group.done", in: spool.path("final"), timeout: 30)
        XCTAssertEqual(spool.files(in: "incoming"), ["slow"], "an open file is never claimed")
        XCTAssertEqual(server.requests(for: "/slow1").count, 0)

        handle.write(Data((server.url("/slow2") + "\n").utf8))
        try handle.close()
        try DirectoryWaiter.waitForFile("slow.group.done", in: spool.path("final"), timeout: 30)
        XCTAssertEqual(try spool.read("final", "slow1"), Array("one".utf8))
        XCTAssertEqual(try spool.read("final", "slow2"), Array("two".utf8), "both lines were read: the file was read after close")

        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 0, "SIGTERM stops the daemon cleanly")
    }

    func testRejectedRequestNamesLineAndRuleAndDrainExitsOne() throws {
        server.serve("/ok", body: Array("ok".utf8))
        try spool.drop("typo", """
            url: \(server.url("/ok"))
            prioirty: high
            """)
        try spool.drop("fine", server.url("/ok") + "\n")
        let (status, _) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1)
        XCTAssertEqual(spool.files(in: "rejected"), ["typo", "typo.error"])
        XCTAssertEqual(try spool.read("rejected", "typo"), Array("url: \(server.url("/ok"))\nprioirty: high".utf8),
                       "a rejected request is kept untouched")
        let error = try json("rejected", "typo.error")
        XCTAssertEqual(error["code"] as? String, "unknown-key")
        XCTAssertEqual(error["line"] as? Int, 2)
        XCTAssertEqual(try spool.read("final", "ok"), Array("ok".utf8), "a bad request never blocks a good one")
    }

    func testRequestAndPublishedFileOfTheSameNameNeverCollide() throws {
        // Request files end in done/, published files in final/: a request named `report`
        // publishing a file named `report` keeps both names as they are.
        server.serve("/report", body: Array("the report".utf8))
        try spool.drop("report", "url: \(server.url("/report"))\nname: report\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(spool.files(in: "final"), ["report", "report.done", "report.group.done"], "no -1 suffix")
        XCTAssertEqual(try spool.read("final", "report"), Array("the report".utf8))
        XCTAssertEqual(try json("final", "report.done")["name"] as? String, "report")
        XCTAssertEqual(spool.files(in: "done"), ["report"])
        XCTAssertEqual(String(decoding: try spool.read("done", "report"), as: UTF8.self),
                       "url: \(server.url("/report"))\nname: report\n", "the request file, intact")
    }

    func testFinalFolderInsideTheSpoolGivesTheOldSharedLayout() throws {
        server.serve("/old", body: Array("old layout".utf8))
        try spool.drop("old", "url: \(server.url("/old"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--final-folder", spool.path("done")])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(spool.files(in: "done"), ["old", "old-1", "old.done", "old.group.done"],
                       "the upgrade path: one shared folder, where names collide as before")
        XCTAssertEqual(try spool.read("done", "old"), Array("old layout".utf8), "the file is published first")
        XCTAssertEqual(String(decoding: try spool.read("done", "old-1"), as: UTF8.self), "url: \(server.url("/old"))\n",
                       "the request file moves in last and takes the suffix")
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("final")), "final/ is not created when another folder is configured")
    }

    func testDrainWithNothingToDoExitsZero() throws {
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        for folder in ["incoming", "tmp", "active", "staging", "final", "done", "failed", "rejected"] {
            var isDir: ObjCBool = false
            XCTAssertTrue(FileManager.default.fileExists(atPath: spool.path(folder), isDirectory: &isDir) && isDir.boolValue,
                          "\(folder)/ is created at start")
        }
    }

    func testAddValidatesThenWritesThroughTmpAndTheDaemonFetchesIt() throws {
        server.serve("/added.txt", body: Array("added".utf8))
        let add = try DaemonProcess.launch(["add", server.url("/added.txt"), "--name", "a.txt", "--priority", "high",
                                            "--spool", spool.root])
        XCTAssertEqual(try add.waitForExit(timeout: 30), 0, add.stderrText)
        let printed = add.stdoutText.split(separator: "\n").map(String.init)
        let written = try XCTUnwrap(printed.first)
        XCTAssertEqual(printed, [written, spool.path("final", written + ".group.done")], "its name, then its group marker's path")
        XCTAssertEqual(spool.files(in: "incoming"), [written])
        XCTAssertEqual(spool.files(in: "tmp"), [])
        XCTAssertNotNil(written.wholeMatch(of: /add-[0-9]{8}T[0-9]{6}Z-[0-9]+-1/), "a readable name, no stray '.': \(written)")

        for bad in [["ftp://127.0.0.1/x"], ["not a url"], [server.url("/x"), "--sha256", "nothex"],
                    [server.url("/x"), "--name", "../escape"]] {
            let refused = try DaemonProcess.launch(["add"] + bad + ["--spool", spool.root])
            XCTAssertNotEqual(try refused.waitForExit(timeout: 30), 0, "\(bad) must be refused")
            XCTAssertTrue(refused.stderrText.contains("nothing was written"), refused.stderrText)
        }
        XCTAssertEqual(spool.files(in: "incoming"), [written], "a refused add writes nothing")

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "a.txt"), Array("added".utf8))
    }

    func testAddNamesAreReadableAndUniqueWhenManyAddAtOnce() throws {
        let adders = try (0..<8).map { i in
            try DaemonProcess.launch(["add", server.url("/n\(i)"), "--spool", spool.root])
        }
        var names: [String] = []
        for add in adders {
            XCTAssertEqual(try add.waitForExit(timeout: 30), 0, add.stderrText)
            names.append(String(add.stdoutText.split(separator: "\n").first ?? ""))
        }
        XCTAssertEqual(Set(names).count, 8, "eight adds, eight names: \(names)")
        XCTAssertEqual(spool.files(in: "incoming"), names.sorted())
        for name in names {
            XCTAssertNotNil(name.wholeMatch(of: /add-[0-9]{8}T[0-9]{6}Z-[0-9]+-[0-9]+/), name)
            XCTAssertFalse(name.contains("."), name)
        }
    }

    /// A spool named relatively (`--spool spool`, run from its parent folder) still gets absolute
    /// paths printed: `add`'s group marker, `wait`'s ending, every `events --json` path — a consumer
    /// reading them runs in another folder.
    func testPathsPrintedAreAbsoluteWhenTheSpoolIsNamedRelatively() throws {
        server.serve("/rel", body: Array("relative".utf8))
        let parent = (spool.root as NSString).deletingLastPathComponent
        let relative = (spool.root as NSString).lastPathComponent
        /// The CLI run from `parent` (coreutils' `env -C` changes the folder, then execs it).
        func cliInParent(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            let p = try DaemonProcess.launch(["-C", parent, DaemonProcess.executablePath] + arguments, executable: "/usr/bin/env")
            let status = try p.waitForExit(timeout: 60)
            return (status, p.stdoutText, p.stderrText)
        }
        let add = try cliInParent(["add", server.url("/rel"), "--name", "rel.txt", "--spool", relative,
                                   "--final-folder", relative + "/final"])
        XCTAssertEqual(add.status, 0, add.err)
        let printed = add.out.split(separator: "\n").map(String.init)
        let written = try XCTUnwrap(printed.first)
        XCTAssertEqual(printed.last, spool.path("final", written + ".group.done"), "add prints the marker's absolute path")

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        let waited = try cliInParent(["wait", written, "--spool", relative, "--timeout", "30"])
        XCTAssertEqual(waited.status, 0, waited.err)
        XCTAssertEqual(waited.out.split(separator: "\n").map(String.init), [spool.path("final", written + ".group.done")])

        let events = try cliInParent(["events", "--json", "--spool", "./" + relative + "/../" + relative])
        XCTAssertEqual(events.status, 0, events.err)
        let lines = events.out.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, "an item and a group ending: \(events.out)")
        for line in lines {
            let record = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            for key in ["file", "record"] {
                guard let path = record[key] as? String else { continue }
                XCTAssertTrue(path.hasPrefix(spool.root + "/"), "\(key) is absolute and folded: \(path)")
            }
        }
        XCTAssertTrue(events.out.contains(spool.path("final", "rel.txt")), events.out)
    }

    func testSpoolDefaultsToTheEnvironmentVariable() throws {
        server.serve("/env", body: Array("env".utf8))
        try spool.drop("env", server.url("/env") + "\n")
        let daemon = try DaemonProcess.launch(["run", "--once"], environment: ["SPOOLFETCH_SPOOL": spool.root])
        XCTAssertEqual(try daemon.waitForExit(timeout: 60), 0, daemon.stderrText)
        XCTAssertEqual(try spool.read("final", "env"), Array("env".utf8))
    }
}
