import Foundation
import SpoolTestSupport
import XCTest

/// Signed URLs: their query is a credential, so nothing the daemon writes down keeps it.
final class SignedURLTests: SpoolTestCase {
    func testURLQueriesAreLeftOutOfMarkersErrorFilesStatusStagingAndLogs() throws {
        let query = "X-Amz-Signature=QSECRET-5d1e&X-Amz-Credential=AKIAEXAMPLE"
        // Over 1 MiB and slow: its B.state is written while it runs, and status shows it running.
        let body = TestBody.random(count: 2 << 20, seed: 41)
        server.serve("/signed.bin", body: body, etag: "\"v1\"", script: [.slow(chunkSize: 64 * 1024, interval: .milliseconds(60))])
        try spool.drop("nightly", """
            url: \(server.url("/signed.bin?" + query))
            url: \(server.url("/gone.bin?sig=QSECRET-77aa#frag"))
            """)
        let daemon = try DaemonProcess.launch(["run", "--once", "--spool", spool.root, "--log-level", "debug"])

        // While it runs: the status report and the staging state name the URL without its query.
        var seenRunning = false, seenState = false
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "a B.state of the running item") {
            seenState = seenState || spool.files(in: "staging").contains { $0.hasSuffix(".state") }
            return seenState
        }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "nightly#0 running in status") {
            for file in spool.files(in: "status") where file.hasSuffix(".json") {
                guard let text = try? String(contentsOfFile: spool.path("status", file), encoding: .utf8) else { continue }
                XCTAssertFalse(text.contains("QSECRET"), "status must not hold the query: \(text)")
                let report = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                let tasks = report?["tasks"] as? [[String: Any]] ?? []
                if let task = tasks.first(where: { $0["id"] as? String == "nightly#0" }), task["state"] as? String == "running" {
                    XCTAssertEqual(task["url"] as? String, server.url("/signed.bin"))
                    seenRunning = true
                }
            }
            return seenRunning
        }
        for file in spool.files(in: "staging") where file.hasSuffix(".state") {
            let text = String(decoding: try spool.read("staging", file), as: UTF8.self)
            XCTAssertFalse(text.contains("QSECRET"), "staging/\(file): \(text)")
        }
        XCTAssertEqual(try daemon.waitForExit(timeout: 60), 1, daemon.stderrText)

        // The server was asked with the whole URL.
        XCTAssertEqual(server.requests(for: "/signed.bin").first?.uri, "/signed.bin?" + query)
        XCTAssertEqual(try spool.read("final", "signed.bin"), body)
        let marker = try json("final", "signed.bin.done")
        XCTAssertEqual(marker["url"] as? String, server.url("/signed.bin"))
        XCTAssertEqual(marker["urlQuerySha256"] as? String, TestBody.sha256Hex(Array(query.utf8)))
        XCTAssertEqual(marker["finalURL"] as? String, server.url("/signed.bin"))
        let error = try json("failed", "nightly.error")
        let failed = try XCTUnwrap((error["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(failed["url"] as? String, server.url("/gone.bin"))
        XCTAssertEqual(failed["httpStatus"] as? Int, 404)
        let group = try json("final", "nightly.group.done")
        let lines = try XCTUnwrap(group["items"] as? [[String: Any]])
        XCTAssertEqual(lines.map { $0["url"] as? String }, [server.url("/signed.bin"), server.url("/gone.bin")])
        XCTAssertEqual(lines.first?["urlQuerySha256"] as? String, TestBody.sha256Hex(Array(query.utf8)))

        // Nothing the daemon wrote holds the query: the log, and every file but the request itself.
        XCTAssertTrue(daemon.stderrText.contains("/signed.bin"), "the debug log names the transfer")
        XCTAssertFalse(daemon.stderrText.contains("QSECRET"), daemon.stderrText)
        for file in allFiles(under: spool.root) where file != spool.path("failed", "nightly") {
            let text = String(decoding: (FileManager.default.contents(atPath: file) ?? Data()), as: UTF8.self)
            XCTAssertFalse(text.contains("QSECRET"), "\(file) must not hold the query")
        }
    }

    func testKeepURLQueriesWritesURLsWhole() throws {
        server.serve("/a.txt", body: Array("a".utf8))
        let url = server.url("/a.txt?token=KEEP-9c2f")
        try spool.drop("kept", url + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--keep-url-queries", "yes"])
        XCTAssertEqual(status, 0, stderr)
        let marker = try json("final", "a.txt.done")
        XCTAssertEqual(marker["url"] as? String, url)
        XCTAssertEqual(marker["urlQuerySha256"] as? String, TestBody.sha256Hex(Array("token=KEEP-9c2f".utf8)))
    }

    private func allFiles(under root: String) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: root) else { return [] }
        return e.compactMap { $0 as? String }.map { root + "/" + $0 }.filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDir) && !isDir.boolValue
        }
    }
}

/// URLs whose expiry is known (read from the URL, or `expires:`) and has passed.
final class URLExpiryEndToEndTests: SpoolTestCase {
    /// `X-Amz-Date`'s form: `20261126T210000Z`.
    static func amzDate(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return f.string(from: date)
    }

    /// An S3 SigV4-shaped URL on the test server, signed at `signed` for `seconds`.
    func s3URL(_ path: String, signed: Date, seconds: Int) -> String {
        server.url(path + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261126%2Fus-east-1%2Fs3%2Faws4_request"
                   + "&X-Amz-Date=\(Self.amzDate(signed))&X-Amz-Expires=\(seconds)&X-Amz-SignedHeaders=host&X-Amz-Signature=0a1b2c")
    }

    func testAnExpiredURLFailsAtItsTurnWithoutARequestToTheServer() throws {
        for path in ["/s3-expired.bin", "/key-expired.bin", "/fresh.bin"] { server.serve(path, body: Array(path.utf8)) }
        let now = Date()
        try spool.drop("expiring", """
            url: \(s3URL("/s3-expired.bin", signed: now.addingTimeInterval(-7200), seconds: 3600))
            url: \(server.url("/key-expired.bin"))
            expires: \(rfc3339(now.addingTimeInterval(-10)))
            url: \(s3URL("/fresh.bin", signed: now, seconds: 3600))
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(server.requests(for: "/s3-expired.bin").isEmpty, "no request with an expired URL")
        XCTAssertTrue(server.requests(for: "/key-expired.bin").isEmpty, "no request past expires:")
        XCTAssertEqual(try spool.read("final", "fresh.bin"), Array("/fresh.bin".utf8))
        let items = try XCTUnwrap(try json("failed", "expiring.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["code"] as? String }, ["url-expired", "url-expired"])
        XCTAssertEqual(items.map { $0["attempts"] as? Int }, [0, 0])
        let s3Expiry = rfc3339(Date(timeIntervalSince1970: floor(now.timeIntervalSince1970) - 3600))
        XCTAssertTrue((items[0]["message"] as? String ?? "").contains("expired at \(s3Expiry) (X-Amz-Date + X-Amz-Expires)"),
                      "\(items[0])")
        XCTAssertTrue((items[1]["message"] as? String ?? "").contains("(expires key)"), "\(items[1])")
        XCTAssertEqual(items[0]["url"] as? String, server.url("/s3-expired.bin"))
    }

    /// nginx `secure_link` (`?md5=…&expires=<unix time>`): an expired link is never sent, and
    /// fails naming its expiry instead of the server's bare 410.
    func testAnExpiredNginxSecureLinkFailsWithoutARequest() throws {
        server.serve("/secure.bin", body: Array("data".utf8), script: [.status(410)])
        server.serve("/secure-fresh.bin", body: Array("fresh".utf8))
        let past = Int(Date().timeIntervalSince1970) - 600
        let future = Int(Date().timeIntervalSince1970) + 3600
        try spool.drop("secure", """
            url: \(server.url("/secure.bin?md5=Xq3Lp0r1Hc5vV9yDqY4m2A&expires=\(past)"))
            url: \(server.url("/secure-fresh.bin?md5=Zq3Lp0r1Hc5vV9yDqY4m2A&expires=\(future)"))
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(server.requests(for: "/secure.bin").isEmpty, "no request with an expired secure link")
        XCTAssertEqual(try spool.read("final", "secure-fresh.bin"), Array("fresh".utf8))
        let items = try XCTUnwrap(try json("failed", "secure.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["code"] as? String }, ["url-expired"])
        let expiry = rfc3339(Date(timeIntervalSince1970: Double(past)))
        XCTAssertTrue((items[0]["message"] as? String ?? "").contains("expired at \(expiry) (md5 + expires)"), "\(items[0])")
    }

    func testARequestDeferredPastItsURLsExpiryIsFlaggedAtIntakeAndFailsWithoutARequest() throws {
        server.serve("/nightly.bin", body: Array("data".utf8))
        let now = Date()
        try spool.drop("nightly", """
            earliest-start: \(rfc3339(now.addingTimeInterval(4)))
            url: \(s3URL("/nightly.bin", signed: now, seconds: 2))
            """)
        let daemon = try DaemonProcess.launch(["run", "--once", "--spool", spool.root])
        try daemon.waitForStderr(containing: "URLs expire before their items may start", timeout: 30)
        var warning: String?
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "the expiry warning in status") {
            for file in spool.files(in: "status") where file.hasSuffix(".json") {
                let report = (try? spool.read("status", file)).flatMap { try? JSONSerialization.jsonObject(with: Data($0)) } as? [String: Any]
                warning = ((report?["daemon"] as? [String: Any])?["urlExpiryWarnings"] as? [String])?.first
            }
            return warning != nil
        }
        XCTAssertTrue(warning?.contains("nightly#0") ?? false, warning ?? "")
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 1, daemon.stderrText)
        XCTAssertTrue(server.allRequests.isEmpty, "the server saw no request")
        let items = try XCTUnwrap(try json("failed", "nightly.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "url-expired")
    }
}
