import Foundation
import SpoolTestSupport
import XCTest

/// `--refresh-hook`: a fresh URL for an item whose signed URL expired while it waited, or was
/// refused mid-batch, from a server that signs its URLs (HMAC, 403 once expired).
final class RefreshHookTests: SpoolTestCase {
    private var hookDir: String!
    private var hookCommand: String { "sh \(hookDir!)/hook" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        server.requireSignedURLs(key: "k3y-41")
        hookDir = try TempSpool.makeScratchFolder(prefix: "spoolfetch-refresh")
        let dir = hookDir!
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        // Records its environment; answers by its refresh key: a URL from a file, garbage, or a failure.
        try """
            env | grep '^SPOOLFETCH_' | sort > "\(dir)/env-$SPOOLFETCH_REFRESH_KEY"
            case "$SPOOLFETCH_REFRESH_KEY" in
              garbage) echo 'here is your file: none' ;;
              fails) echo 'no credentials for this bucket' >&2; exit 3 ;;
              *) cat "\(dir)/url-$SPOOLFETCH_REFRESH_KEY" ;;
            esac
            """.write(toFile: dir + "/hook", atomically: true, encoding: .utf8)
    }

    private func fresh(_ key: String, _ url: String) throws {
        try (url + "\n").write(toFile: "\(hookDir!)/url-\(key)", atomically: true, encoding: .utf8)
    }

    private func hookEnvironment(_ key: String) throws -> [String: String] {
        let text = try String(contentsOfFile: "\(hookDir!)/env-\(key)", encoding: .utf8)
        var env: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1)
            env[String(kv[0])] = kv.count > 1 ? String(kv[1]) : ""
        }
        return env
    }

    func testARequestDeferredPastItsURLsExpiryIsPublishedThroughTheRefreshHook() throws {
        let body = TestBody.random(count: 100_000, seed: 41)
        server.serve("/nightly.bin", body: body, etag: "\"n1\"")
        let stale = server.signedURL("/nightly.bin", validFor: 1)
        try fresh("nightly", server.signedURL("/nightly.bin", validFor: 300))
        try spool.drop("deferred", """
            earliest-start: \(rfc3339(Date().addingTimeInterval(3)))
            refresh-key: nightly
            url: \(stale)
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--refresh-hook", hookCommand])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "nightly.bin"), body)
        XCTAssertEqual(server.refusedSignatures, 0, "no request went out with the expired URL")
        XCTAssertEqual(server.requests(for: "/nightly.bin").count, 1)
        let env = try hookEnvironment("nightly")
        XCTAssertEqual(env["SPOOLFETCH_REASON"], "expired")
        XCTAssertEqual(env["SPOOLFETCH_URL"], stale)
        XCTAssertEqual(env["SPOOLFETCH_ID"], "deferred#0")
        XCTAssertEqual(env["SPOOLFETCH_REQUEST"], "deferred")
        XCTAssertEqual(env["SPOOLFETCH_GROUP"], "deferred")
        XCTAssertFalse(stderr.contains("URLs expire before their items may start"), "a hook is configured: no warning")
        XCTAssertFalse(stderr.contains("Signature="), "no signed URL in the log")
        XCTAssertEqual(try json("final", "nightly.bin.done")["url"] as? String, server.url("/nightly.bin"))
    }

    func testAHookThatPrintsGarbageOrFailsFailsTheItemWithAClearReason() throws {
        server.serve("/a.bin", body: Array("a".utf8))
        try spool.drop("bad-hooks", """
            url: \(server.signedURL("/a.bin", validFor: -10))
            refresh-key: garbage
            url: \(server.signedURL("/a.bin", validFor: -10))
            refresh-key: fails
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--refresh-hook", hookCommand])
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(server.allRequests.isEmpty, "an expired URL is never sent")
        let items = try XCTUnwrap(try json("failed", "bad-hooks.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["code"] as? String }, ["refresh-failed", "refresh-failed"])
        XCTAssertEqual(items[0]["message"] as? String,
                       "the refresh hook's first output line is not a usable URL: the URL contains a space or control character")
        XCTAssertEqual(items[1]["message"] as? String, "the refresh hook exited with status 3")
        XCTAssertTrue(stderr.contains("no credentials for this bucket"), "the hook's stderr is logged")
        XCTAssertFalse(stderr.contains("here is your file"), "the answer line is never logged")
    }

    func testA403MidTransferIsRefreshedAndTheResumeKeepsTheBytes() throws {
        let body = TestBody.random(count: 4 << 20, seed: 403)
        // The first response stalls after 1 MiB until the stall timeout cuts it; by then the URL
        // has expired, and the retry is refused.
        server.serve("/big.bin", body: body, etag: "\"b1\"", script: [.stall(afterBytes: 1 << 20), .normal])
        let stale = server.signedURL("/big.bin", validFor: 2, readable: false)
        let renewed = server.signedURL("/big.bin", validFor: 300, readable: false)
        try fresh("big", renewed)
        try spool.drop("long", "refresh-key: big\nurl: \(stale)\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--refresh-hook", hookCommand, "--stall-timeout", "2", "--retry-base", "0.2"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "big.bin"), body)
        XCTAssertEqual(server.refusedSignatures, 1, "one refusal, then the refreshed URL")
        let requests = server.requests(for: "/big.bin")
        XCTAssertEqual(requests.map(\.uri), [stale, stale, renewed].map { String($0.dropFirst(server.url("").count)) })
        XCTAssertEqual(requests.last?.header("Range"), "bytes=\(1 << 20)-")
        XCTAssertEqual(requests.last?.header("If-Range"), "\"b1\"")
        XCTAssertLessThanOrEqual(Double(server.bodyBytesSent), 1.1 * Double(body.count), "the bytes on disk were kept")
        XCTAssertEqual(try hookEnvironment("big")["SPOOLFETCH_REASON"], "http-403")
        XCTAssertFalse(stderr.contains("sig="), "no signed URL in the log")
    }
}

extension RefreshHookTests {
    func testTheRefreshedURLIsKeptInTheItemsStateAndAResumeAfterARestartUsesIt() throws {
        let body = TestBody.random(count: 4 << 20, seed: 77)
        server.serve("/kept.bin", body: body, etag: "\"k1\"", script: [.stall(afterBytes: 1 << 20), .normal])
        let renewed = server.signedURL("/kept.bin", validFor: 300)
        try fresh("kept", renewed)
        try spool.drop("restart", "refresh-key: kept\nurl: \(server.signedURL("/kept.bin", validFor: -10))\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root, "--refresh-hook", hookCommand])
        // Wait until the refreshed transfer has its body under way (its B.state is written then).
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "the item's B.state") {
            spool.files(in: "staging").contains("restart.0.state")
        }
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "the part to fill") {
            server.bodyBytesSent >= 1 << 20
        }
        first.signal(SIGTERM)
        XCTAssertEqual(try first.waitForExit(timeout: 30), 0, first.stderrText)
        let state = try json("staging", "restart.0.state")
        XCTAssertEqual(state["refreshedURL"] as? String, renewed, "the hook's URL is the item's, across a restart")
        let kept = state["bytes"] as? Int ?? 0

        // Without a refresh hook now: only the kept URL can fetch the rest (the request's has expired).
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(try spool.read("final", "kept.bin"), body)
        let last = try XCTUnwrap(server.requests(for: "/kept.bin").last)
        XCTAssertEqual(server.url(last.uri), renewed)
        if kept > 0 { XCTAssertEqual(last.header("Range"), "bytes=\(kept)-") }
        XCTAssertEqual(server.refusedSignatures, 0)
    }

    /// kill -9 in the middle of a segmented download, then its URL stops working (the server's
    /// key changed: every old signature gets 403); the restart's 403 asks the hook, and the
    /// resume keeps every range already in the part, not only the in-order prefix.
    func testAKilledSegmentedDownloadWhoseURLExpiredKeepsItsRangesThroughTheRefresh() throws {
        let size = 24 << 20
        let body = TestBody.random(count: size, seed: 404)
        server.serve("/seg.bin", body: body, etag: "\"s1\"", script: [.slow(chunkSize: 32 << 10, interval: .milliseconds(20))])
        try spool.drop("seg", "refresh-key: seg\nurl: \(server.signedURL("/seg.bin", validFor: 600, readable: false))\n")
        let first = try DaemonProcess.launch(["run", "--spool", spool.root, "--refresh-hook", hookCommand])
        var done = 0
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 60, what: "a state with ranges half done") {
            guard let name = self.spool.files(in: "staging").first(where: { $0.hasSuffix(".state") }),
                  let bytes = try? self.spool.read("staging", name),
                  let state = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                  let ranges = state["ranges"] as? [[Int]], let prefix = state["bytes"] as? Int else { return false }
            done = prefix + ranges.reduce(0) { $0 + ($1[1] - $1[0]) }
            return done > size / 2
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        let sentBefore = server.bodyBytesSent
        server.requireSignedURLs(key: "rotated")
        try fresh("seg", server.signedURL("/seg.bin", validFor: 600, readable: false))
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--refresh-hook", hookCommand, "--retry-base", "0.2"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "seg.bin")), TestBody.sha256Hex(body))
        XCTAssertGreaterThanOrEqual(server.refusedSignatures, 1, "the old URL was refused")
        XCTAssertEqual(try hookEnvironment("seg")["SPOOLFETCH_REASON"], "http-403")
        let after = server.bodyBytesSent - sentBefore
        XCTAssertLessThanOrEqual(after, size - done + size / 20,
                                 "after the kill the server sent \(after) bytes; \(done) of \(size) were in the part")
    }
}
