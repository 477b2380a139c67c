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
