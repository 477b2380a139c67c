import Foundation
import SpoolTestSupport
import XCTest

/// `spoolfetch store` without `--store` reads the store the daemon uses (from its status report,
/// else the last drain's record, else `--config`'s `store`), and says why that one; the store's
/// counters (`store`'s hits, the metrics' `spoolfetch_store_hits_total`) are current within a
/// second of a hit, not at `--metrics-interval`.
final class StoreFindingTests: SpoolTestCase {
    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText)
    }

    private func summary(_ extra: [String] = []) throws -> [String: Any] {
        let r = try cli(["store", "--json", "--spool", spool.root] + extra)
        XCTAssertEqual(r.status, 0, r.err)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], r.out)
    }

    private func metric(_ name: String, in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            return line.split(separator: " ").last.flatMap { Double($0) }
        }
        return nil
    }

    func testStoreFindsTheRunningDaemonsStoreAndItsCountersAreCurrentWithinASecondOfAHit() throws {
        let cas = try TempSpool.makeScratchFolder(prefix: "spoolfetch-cas")
        defer { try? FileManager.default.removeItem(atPath: cas) }
        let body = TestBody.random(count: 40_000, seed: 61)
        let digest = TestBody.sha256Hex(body)
        server.serve("/a", body: body)
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--store", cas, "--metrics-interval", "60"])
        defer { daemon.terminate() }
        try spool.drop("one", "url: \(server.url("/a"))\nname: one\nsha256: \(digest)\n")
        try DirectoryWaiter.waitForFile("one.done", in: spool.path("final"), timeout: 60)
        try DirectoryWaiter.wait(in: cas + "/sha256/" + digest.prefix(2), timeout: 60, what: "the body entered the store") {
            FileManager.default.fileExists(atPath: cas + "/sha256/" + digest.prefix(2) + "/" + digest)
        }
        // A status report names the store once the daemon has written one.
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "the report names the store") {
            ((try? self.summary())?["path"] as? String) == cas
        }

        try spool.drop("two", "url: \(server.url("/a"))\nname: two\nsha256: \(digest)\n")
        try DirectoryWaiter.waitForFile("two.done", in: spool.path("final"), timeout: 60)
        let published = Date()
        XCTAssertEqual(server.requests(for: "/a").count, 1, "two was a hit")
        try DirectoryWaiter.wait(in: cas + "/counters", timeout: 30, what: "the store's counters show the hit") {
            ((try? self.summary())?["hits"] as? Int) == 1
        }
        let counted = Date().timeIntervalSince(published)
        var prom = ""
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "the metrics show the hit") {
            prom = (try? self.cli(["status", "--metrics", "--spool", self.spool.root]).out) ?? ""
            return self.metric("spoolfetch_store_hits_total", in: prom) == 1
        }
        let measured = Date().timeIntervalSince(published)
        // Within a second of the hit (which came before the marker), with room for a loaded machine;
        // before, the metrics waited out --metrics-interval (60 s here).
        XCTAssertLessThan(counted, 2, "spoolfetch store's hits")
        XCTAssertLessThan(measured, 2, "the metrics' hits:\n\(prom)")

        let shown = try summary()
        XCTAssertEqual(shown["entries"] as? Int, 1)
        XCTAssertEqual(shown["bytesSaved"] as? Int, body.count)
        let source = try XCTUnwrap(shown["source"] as? String)
        XCTAssertTrue(source.contains("the running daemon (pid "), source)
        let text = try cli(["store", "--spool", spool.root])
        XCTAssertTrue(text.out.hasPrefix("\(cas): 1 entries"), text.out)
        XCTAssertTrue(text.out.contains("(the running daemon (pid "), text.out)
        let verify = try cli(["store", "verify", "--spool", spool.root])
        XCTAssertEqual(verify.status, 0, verify.err)
        XCTAssertTrue(verify.out.hasPrefix("\(cas) (the running daemon") && verify.out.contains("checked 1 entries"), verify.out)
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("store")), "SPOOL/store was never made")

        // Stopped (not a drain: no record): the default, saying why; --config names the store.
        daemon.signal(SIGTERM)
        XCTAssertEqual(try daemon.waitForExit(timeout: 30), 0, daemon.stderrText)
        let fallback = try summary()
        XCTAssertEqual(fallback["path"] as? String, spool.path("store"))
        XCTAssertTrue((fallback["source"] as? String ?? "").hasPrefix("the default, SPOOL/store: no daemon runs"), "\(fallback)")
        let config = spool.path("tmp", "spoolfetch.conf")
        try "store = \(cas)\n".write(toFile: config, atomically: true, encoding: .utf8)
        let configured = try summary(["--config", config])
        XCTAssertEqual(configured["path"] as? String, cas)
        XCTAssertEqual(configured["hits"] as? Int, 1)
        XCTAssertEqual(configured["source"] as? String, "store in --config \(config)")
        let bad = try cli(["store", "--spool", spool.root, "--config", spool.path("tmp", "missing.conf")])
        XCTAssertEqual(bad.status, 64, bad.out)
        XCTAssertTrue(bad.err.contains("cannot read the config file"), bad.err)
    }

    func testStoreFindsTheStoreTheLastDrainUsed() throws {
        let cas = try TempSpool.makeScratchFolder(prefix: "spoolfetch-cas")
        defer { try? FileManager.default.removeItem(atPath: cas) }
        let body = TestBody.random(count: 10_000, seed: 62)
        server.serve("/b", body: body)
        try spool.drop("b", "url: \(server.url("/b"))\nsha256: \(TestBody.sha256Hex(body))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--store", cas])
        XCTAssertEqual(status, 0, stderr)
        let shown = try summary()
        XCTAssertEqual(shown["path"] as? String, cas)
        XCTAssertEqual(shown["entries"] as? Int, 1)
        XCTAssertTrue((shown["source"] as? String ?? "").hasPrefix("the last drain (pid "), "\(shown)")
        XCTAssertEqual(try summary(["--store", spool.path("store")])["source"] as? String, "--store")
    }
}
