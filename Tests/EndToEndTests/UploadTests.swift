import Foundation
import SpoolTestSupport
import XCTest

/// `upload:` items: files from `outgoing/` sent with PUT or POST, recorded in `NAME.uploaded`.
final class UploadTests: SpoolTestCase {
    private func putOutgoing(_ name: String, _ bytes: [UInt8]) throws {
        try FileManager.default.createDirectory(atPath: spool.path("outgoing"), withIntermediateDirectories: true)
        let temp = spool.path("tmp", "." + name)
        try Data(bytes).write(to: URL(fileURLWithPath: temp))
        XCTAssertEqual(rename(temp, spool.path("outgoing", name)), 0)
    }

    func testPutAndPostLandByteIdenticalWithRecordsAndTheFilesMoveToDone() throws {
        let put = TestBody.random(count: 3 << 20, seed: 43)
        let post = Array("{\"rows\": 3}\n".utf8)
        let empty: [UInt8] = []
        try putOutgoing("dump.bin", put)
        try putOutgoing("rows.json", post)
        try putOutgoing("empty", empty)
        server.acceptUploads("/bucket/dump.bin", status: 201,
                             headers: [("ETag", "\"v1\""), ("Location", "/bucket/dump.bin?version=1")],
                             responseBody: Array("created\n".utf8))
        server.acceptUploads("/api/rows", status: 200, responseBody: Array("{\"ok\":true}".utf8))
        server.acceptUploads("/bucket/empty", status: 204)
        try spool.drop("nightly", """
            url: \(server.url("/bucket/dump.bin?X-Amz-Signature=SECRET-SIG-5521"))
            upload: dump.bin

            url: \(server.url("/api/rows"))
            upload: rows.json
            method: POST
            content-type: application/json

            url: \(server.url("/bucket/empty"))
            upload: empty
            """)
        let hookOut = spool.path("tmp", "hook-env")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--on-item", "[ \"$SPOOLFETCH_ID\" = nightly#0 ] && env | grep '^SPOOLFETCH_' > \(hookOut); true"])
        XCTAssertEqual(status, 0, stderr)

        let hookEnv = try String(contentsOfFile: hookOut, encoding: .utf8)
        XCTAssertTrue(hookEnv.contains("SPOOLFETCH_STATUS=uploaded"), hookEnv)
        XCTAssertTrue(hookEnv.contains("SPOOLFETCH_SHA256=\(TestBody.sha256Hex(put))"), hookEnv)
        XCTAssertTrue(hookEnv.contains("SPOOLFETCH_PATH=\(spool.path("final", "dump.bin.uploaded"))"), hookEnv)
        XCTAssertEqual(server.uploads(at: "/bucket/dump.bin").count, 1)
        XCTAssertEqual(server.uploads(at: "/bucket/dump.bin").first, put, "the PUT body is the file, byte for byte")
        XCTAssertEqual(server.uploads(at: "/api/rows"), [post])
        XCTAssertEqual(server.uploads(at: "/bucket/empty"), [empty])
        let putRequest = try XCTUnwrap(server.requests(for: "/bucket/dump.bin").first)
        XCTAssertEqual(putRequest.method, "PUT")
        XCTAssertEqual(putRequest.header("Content-Type"), "application/octet-stream")
        XCTAssertEqual(putRequest.header("Expect"), "100-continue")
        let postRequest = try XCTUnwrap(server.requests(for: "/api/rows").first)
        XCTAssertEqual(postRequest.method, "POST")
        XCTAssertEqual(postRequest.header("Content-Type"), "application/json")

        let record = try json("final", "dump.bin.uploaded")
        XCTAssertEqual(record["method"] as? String, "PUT")
        XCTAssertEqual(record["bytes"] as? Int, put.count)
        XCTAssertEqual(record["sha256"] as? String, TestBody.sha256Hex(put))
        XCTAssertEqual(record["httpStatus"] as? Int, 201)
        XCTAssertEqual(record["etag"] as? String, "\"v1\"")
        XCTAssertEqual(record["url"] as? String, server.url("/bucket/dump.bin"), "no query: a signed URL is a secret")
        XCTAssertEqual(record["location"] as? String, "/bucket/dump.bin")
        XCTAssertEqual(record["response"] as? String, "dump.bin.response")
        XCTAssertEqual(try spool.read("final", "dump.bin.response"), Array("created\n".utf8))
        let postRecord = try json("final", "rows.json.uploaded")
        XCTAssertEqual(postRecord["method"] as? String, "POST")
        XCTAssertEqual(postRecord["contentType"] as? String, "application/json")
        XCTAssertEqual(postRecord["sha256"] as? String, TestBody.sha256Hex(post))
        XCTAssertEqual(try spool.read("final", "rows.json.response"), Array("{\"ok\":true}".utf8))
        XCTAssertEqual(try json("final", "empty.uploaded")["httpStatus"] as? Int, 204)
        XCTAssertFalse(spool.files(in: "final").contains("empty.response"), "no body, no response file")

        let group = try json("final", "nightly.group.done")
        let items = try XCTUnwrap(group["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["outcome"] as? String }, ["uploaded", "uploaded", "uploaded"])
        XCTAssertEqual(items.first?["marker"] as? String, "dump.bin.uploaded")
        XCTAssertEqual(spool.files(in: "outgoing"), [], "sent files leave outgoing/")
        XCTAssertEqual(try spool.read("done", "dump.bin"), put)
        XCTAssertTrue(spool.files(in: "done").contains("nightly"))
        XCTAssertFalse(stderr.contains("SECRET-SIG-5521"), "the signed query is never logged")
    }

    func testEveryPathTrickIsRejectedWithItsLineAndNothingIsSent() throws {
        let outsideDir = spool.root + "-outside"
        try FileManager.default.createDirectory(atPath: outsideDir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: outsideDir) }
        let secret = outsideDir + "/secret"
        try Data("SECRET-FILE-CONTENT".utf8).write(to: URL(fileURLWithPath: secret))
        try putOutgoing("ok.bin", Array("fine".utf8))
        let outgoing = spool.path("outgoing")
        XCTAssertEqual(symlink(secret, outgoing + "/link"), 0)
        XCTAssertEqual(symlink("/etc/passwd", outgoing + "/passwd-link"), 0)
        XCTAssertEqual(mkfifo(outgoing + "/fifo", 0o600), 0)
        try FileManager.default.createDirectory(atPath: outgoing + "/dir", withIntermediateDirectories: true)
        // A hard link to a file elsewhere on the same filesystem: one inode, two names.
        XCTAssertEqual(link(secret, outgoing + "/hard"), 0)
        server.acceptUploads("/u")
        let u = server.url("/u")
        let cases: [(String, String, String, Int)] = [
            ("absolute", "url: \(u)\nupload: /etc/shadow\n", "bad-upload", 2),
            ("dotdot", "url: \(u)\nupload: ../incoming/x\n", "bad-upload", 2),
            ("dotdot-inside", "url: \(u)\nupload: a/../../x\n", "bad-upload", 2),
            ("subfolder", "url: \(u)\nupload: dir/x\n", "bad-upload", 2),
            ("hidden", "url: \(u)\nupload: .secret\n", "bad-upload", 2),
            ("symlink", "url: \(u)\nupload: link\n", "upload-not-regular", 1),
            ("symlink-etc", "url: \(u)\nupload: passwd-link\n", "upload-not-regular", 1),
            ("fifo", "url: \(u)\nupload: fifo\n", "upload-not-regular", 1),
            ("directory", "url: \(u)\nupload: dir\n", "upload-not-regular", 1),
            ("hardlink", "url: \(u)\nupload: hard\n", "upload-not-regular", 1),
            ("missing", "url: \(u)\nupload: nothing-here\n", "upload-missing", 1),
            ("second-item", "url: \(u)\nupload: ok.bin\n\nurl: \(u)\nupload: link\n", "upload-not-regular", 4),
            ("default", "upload: ok.bin\nurl: \(u)\n", "item-level-key", 1),
            ("with-name", "url: \(u)\nupload: ok.bin\nname: other\n", "upload-conflict", 3),
            ("with-sha256", "url: \(u)\nsha256: \(String(repeating: "0", count: 64))\nupload: ok.bin\n", "upload-conflict", 3),
            ("method-alone", "url: \(u)\nmethod: PUT\n", "upload-only-key", 2),
            ("bad-method", "url: \(u)\nupload: ok.bin\nmethod: DELETE\n", "bad-method", 3),
            ("bad-type", "url: \(u)\nupload: ok.bin\ncontent-type: text\n", "bad-content-type", 3),
            ("twice", "url: \(u)\nupload: ok.bin\nurl: \(u)\nupload: ok.bin\n", "duplicate-upload", 3),
        ]
        for (name, text, _, _) in cases { try spool.drop(name, text) }
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, stderr)
        for (name, _, rule, line) in cases {
            XCTAssertTrue(spool.files(in: "rejected").contains(name), "\(name) must be rejected")
            let error = try json("rejected", name + ".error")
            XCTAssertEqual(error["code"] as? String, rule, name)
            XCTAssertEqual(error["line"] as? Int, line, name)
            XCTAssertFalse((error["message"] as? String ?? "").isEmpty, name)
        }
        XCTAssertTrue(server.requests(for: "/u").isEmpty, "nothing was sent")
        XCTAssertEqual(server.uploadBytesReceived, 0)
        XCTAssertEqual(try String(contentsOfFile: secret, encoding: .utf8), "SECRET-FILE-CONTENT")
        XCTAssertTrue(spool.files(in: "outgoing").contains("ok.bin"), "a rejected request's file stays for its producer")
        XCTAssertFalse(spool.files(in: "final").contains { $0.hasSuffix(".uploaded") })
    }

    func testARefusedUploadSendsNoBody() throws {
        try putOutgoing("big.bin", TestBody.random(count: 2 << 20, seed: 7))
        server.acceptUploads("/refuse", script: [403])
        try spool.drop("refused", "url: \(server.url("/refuse"))\nupload: big.bin\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, stderr)
        let items = try XCTUnwrap(try json("failed", "refused.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "http-status")
        XCTAssertEqual(items.first?["httpStatus"] as? Int, 403)
        XCTAssertEqual(server.requests(for: "/refuse").count, 1)
        XCTAssertEqual(server.uploadBytesReceived, 0, "Expect: 100-continue: the refusal came before the body")
        XCTAssertEqual(spool.files(in: "failed").filter { $0 == "big.bin" }, ["big.bin"], "the file goes with its failed request")
    }

    func testAFileChangedWhileQueuedFailsWithUploadChanged() throws {
        try putOutgoing("report.csv", Array("a,b\n1,2\n".utf8))
        server.acceptUploads("/r")
        let start = rfc3339(Date().addingTimeInterval(3))
        try spool.drop("changed", "url: \(server.url("/r"))\nupload: report.csv\nearliest-start: \(start)\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--log-level", "debug"])
        defer { daemon.terminate() }
        // Accepted: parsed, its upload's file looked at, its item queued.
        try daemon.waitForStderr(containing: "claimed a request", timeout: 20)
        // The producer writes to the file after the request was accepted.
        let fd = open(spool.path("outgoing", "report.csv"), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(write(fd, "3,4\n", 4), 4)
        close(fd)
        try DirectoryWaiter.waitForFile("changed.error", in: spool.path("failed"), timeout: 30)
        let items = try XCTUnwrap(try json("failed", "changed.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "upload-changed")
        XCTAssertTrue(server.requests(for: "/r").isEmpty, "nothing was sent")
    }

    func testKilledDuringAnUploadItIsSentAgainWholeAndRecordedOnce() throws {
        let body = TestBody.random(count: 2 << 20, seed: 99)
        try putOutgoing("big.bin", body)
        server.acceptUploads("/big", status: 201)
        try spool.drop("crash", "url: \(server.url("/big"))\nupload: big.bin\n")
        // Slowed to about 10 s, so the kill lands in the middle of the body.
        let first = try DaemonProcess.launch(["run", "--spool", spool.root, "--max-rate", "200k"])
        try server.waitForUploadBytes(atLeast: 256 << 10, timeout: 30)
        first.signal(SIGKILL)
        _ = try first.waitForExit(timeout: 10)
        XCTAssertEqual(server.uploads(at: "/big").count, 0, "the cut body is not complete")
        XCTAssertFalse(spool.files(in: "final").contains("big.bin.uploaded"))

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.uploads(at: "/big"), [body], "one complete body, sent again from byte 0")
        let record = try json("final", "big.bin.uploaded")
        XCTAssertEqual(record["sha256"] as? String, TestBody.sha256Hex(body))
        XCTAssertEqual(record["bytes"] as? Int, body.count)
        XCTAssertEqual(record["attempts"] as? Int, 2, "the body went out twice, as a download's attempts count: \(record)")
        XCTAssertFalse(spool.files(in: "staging").contains { $0.hasSuffix(".state") }, "the upload's state goes with its request")
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("big.bin") }, ["big.bin.uploaded"], "one record")
        XCTAssertEqual(try spool.read("done", "big.bin"), body)
        XCTAssertEqual(spool.files(in: "outgoing"), [])
    }

    func testAnUploadToAHostInOutageWaitsWithoutUsingAttempts() throws {
        let gone = try TestHTTPServer.start()
        let port = gone.port
        try gone.shutdown()
        try putOutgoing("late.bin", TestBody.random(count: 100_000, seed: 5))
        try spool.drop("outage", "url: http://127.0.0.1:\(port)/late\nupload: late.bin\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--max-attempts", "2",
                                               "--retry-base", "0.05", "--retry-cap", "0.1"])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "host unreachable; its items wait", timeout: 30)
        try daemon.waitForStderr(timeout: 30, what: "two failed probes") { log in
            log.components(separatedBy: "probe failed").count - 1 >= 2
        }
        XCTAssertEqual(spool.files(in: "failed"), [], "an outage fails nothing")
        let back = try TestHTTPServer.start(port: port)
        defer { try? back.shutdown() }
        back.acceptUploads("/late", status: 201)
        try DirectoryWaiter.waitForFile("outage.group.done", in: spool.path("final"), timeout: 60)
        let record = try json("final", "late.bin.uploaded")
        XCTAssertEqual(record["attempts"] as? Int, 1, "the outage used up no attempt")
        XCTAssertGreaterThan(record["outageSeconds"] as? Int ?? 0, 0)
        XCTAssertEqual(back.uploads(at: "/late").count, 1)
    }

    func testAFileWrittenToDuringItsUploadFailsWithUploadChanged() throws {
        try putOutgoing("growing.log", TestBody.random(count: 2 << 20, seed: 11))
        server.acceptUploads("/g")
        try spool.drop("growing", "url: \(server.url("/g"))\nupload: growing.log\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--max-rate", "200k"])
        defer { daemon.terminate() }
        try server.waitForUploadBytes(atLeast: 256 << 10, timeout: 30)
        // The producer appends while the body is on its way.
        let fd = open(spool.path("outgoing", "growing.log"), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(write(fd, "more\n", 5), 5)
        close(fd)
        try DirectoryWaiter.waitForFile("growing.error", in: spool.path("failed"), timeout: 60)
        let items = try XCTUnwrap(try json("failed", "growing.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "upload-changed")
        XCTAssertEqual(items.first?["attempts"] as? Int, 1, "not retried: the file is not the one queued")
        XCTAssertFalse(spool.files(in: "final").contains("growing.log.uploaded"))
    }

    func testMaxRateCountsTheBytesSent() throws {
        let size = 1 << 20
        for i in 0..<2 { try putOutgoing("r\(i).bin", TestBody.random(count: size, seed: UInt64(i))) }
        server.acceptUploads("/r0")
        server.acceptUploads("/r1")
        try spool.drop("rated", "url: \(server.url("/r0"))\nupload: r0.bin\nurl: \(server.url("/r1"))\nupload: r1.bin\n")
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--max-rate", "512k"])
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.uploads(at: "/r0").count + server.uploads(at: "/r1").count, 2)
        // 2 MiB at 512 KiB/s: 4 s, less the bucket's first second of burst.
        XCTAssertGreaterThanOrEqual(elapsed, 2.5, "2 MiB sent at --max-rate 512k took \(elapsed) s")
    }

    func testARefusedSignedPutURLIsRefreshedThroughTheHook() throws {
        server.requireSignedURLs(key: "k3y-43")
        let hookDir = try TempSpool.makeScratchFolder(prefix: "spoolfetch-upload-refresh")
        addTeardownBlock { try? FileManager.default.removeItem(atPath: hookDir) }
        let fresh = server.signedURL("/bucket/x.bin", validFor: 300, readable: false)
        try "echo '\(fresh)'\n".write(toFile: hookDir + "/hook", atomically: true, encoding: .utf8)
        let body = TestBody.random(count: 1 << 20, seed: 3)
        try putOutgoing("x.bin", body)
        server.acceptUploads("/bucket/x.bin", status: 200, headers: [("ETag", "\"x1\"")])
        // Its expiry cannot be read from the URL: the server's 403 is the only sign.
        let stale = server.signedURL("/bucket/x.bin", validFor: -10, readable: false)
        try spool.drop("signed", "url: \(stale)\nupload: x.bin\nrefresh-key: bucket/x.bin\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--refresh-hook", "sh \(hookDir)/hook"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.refusedSignatures, 1)
        XCTAssertEqual(server.uploads(at: "/bucket/x.bin"), [body])
        XCTAssertEqual(server.uploadBytesReceived, body.count, "the refused request sent no body")
        let record = try json("final", "x.bin.uploaded")
        XCTAssertEqual(record["url"] as? String, server.url("/bucket/x.bin"))
        XCTAssertEqual(record["attempts"] as? Int, 1)
        XCTAssertFalse(stderr.contains("sig="), "no signed URL in the log")
    }

    func testAnUploadRecordedBeforeACrashIsNotSentAgain() throws {
        let body = TestBody.random(count: 200_000, seed: 8)
        try putOutgoing("first.bin", body)
        server.acceptUploads("/first", status: 201)
        // The second item keeps the request open: its response stops after a few bytes.
        server.serve("/slow", body: TestBody.random(count: 100_000, seed: 9), etag: "\"s1\"", script: [.stall(afterBytes: 10)])
        try spool.drop("pair", "url: \(server.url("/first"))\nupload: first.bin\n\(server.url("/slow"))\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root])
        try DirectoryWaiter.waitForFile("first.bin", in: spool.path("done"), timeout: 30)
        XCTAssertTrue(spool.files(in: "final").contains("first.bin.uploaded"))
        first.signal(SIGKILL)
        _ = try first.waitForExit(timeout: 10)
        XCTAssertEqual(spool.claimed(), ["pair"], "the request is still open")

        server.serve("/slow", body: TestBody.random(count: 100_000, seed: 9), etag: "\"s1\"")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.uploads(at: "/first").count, 1, "its record exists: not sent again")
        let group = try json("final", "pair.group.done")
        let items = try XCTUnwrap(group["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["outcome"] as? String }, ["uploaded", "published"])
        XCTAssertEqual(try spool.read("done", "first.bin"), body)
    }
}
