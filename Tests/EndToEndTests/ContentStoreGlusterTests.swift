import Foundation
import SpoolTestSupport
import XCTest

/// The content store shared by two workers through two GlusterFS clients (two machines, each with
/// its client caches): the same digest requested on both is fetched once.
final class ContentStoreGlusterTests: SpoolTestCase {
    private var volume: GlusterVolume!

    override func setUpWithError() throws {
        try super.setUpWithError()
        volume = try GlusterVolume()
    }

    override func tearDownWithError() throws {
        volume?.unmount()
        volume = nil
        try super.tearDownWithError()
    }

    func testTwoWorkersOnTwoGlusterClientsFetchTheSameDigestOnce() throws {
        let body = TestBody.random(count: 200_000, seed: 90)
        let digest = TestBody.sha256Hex(body)
        server.serve("/ga.bin", body: body, script: [.slow(chunkSize: 10_000, interval: .milliseconds(60))])
        server.serve("/gb.bin", body: body)
        let first = try TempSpool(root: volume.first + "/spool")
        let second = try TempSpool(root: volume.second + "/spool")
        try first.drop("ga", "url: \(server.url("/ga.bin"))\nsha256: \(digest)\n")
        let flags = ["--store", "yes", "--inotify", "no", "--lease-period", "1", "--lease-timeout", "4", "--log-level", "debug"]
        // A lists incoming/ at start only: the second request is B's.
        let a = try DaemonProcess.launch(["run", "--spool", first.root, "--rescan-interval", "3600"] + flags)
        defer { a.terminate() }
        try a.waitForStderr(containing: "transfer started", timeout: 60)
        try second.drop("gb", "url: \(server.url("/gb.bin"))\nsha256: \(digest)\n")
        let b = try DaemonProcess.launch(["run", "--once", "--spool", second.root, "--rescan-interval", "1"] + flags)
        XCTAssertEqual(try b.waitForExit(timeout: 120), 0, b.stderrText)
        XCTAssertTrue(b.stderrText.contains("waiting for another fetch of the same sha256"), b.stderrText)
        XCTAssertEqual(server.requests(for: "/ga.bin").count, 1)
        XCTAssertEqual(server.requests(for: "/gb.bin").count, 0, "B waited for A's fetch through the other client")
        XCTAssertEqual(try second.read("final", "gb.bin"), body)
        let marker = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(second.read("final", "gb.bin.done"))) as? [String: Any])
        XCTAssertEqual(marker["source"] as? String, "store")
        try a.waitForStderr(containing: "published", timeout: 60)
        a.signal(SIGTERM)
        XCTAssertEqual(try a.waitForExit(timeout: 60), 0, a.stderrText)
        XCTAssertEqual(try first.read("final", "ga.bin"), body)
    }
}
