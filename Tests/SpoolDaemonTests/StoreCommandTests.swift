import Foundation
import SpoolTestSupport
import XCTest

/// `spoolfetch store`, `store show` and `store verify`, each with each of its options, on a spool
/// without a daemon: every option reaches its subcommand (issue 59: the parent's `--store` used to
/// take the subcommand's, so `store verify --store DIR` checked `SPOOL/store`). And no subcommand
/// of the whole CLI declares an option one of its parents also declares.
final class StoreCommandTests: XCTestCase {
    private var spool: TempSpool!
    /// A store elsewhere (`--store`): one good entry and one rotten (same name, other bytes).
    private var elsewhere: String!
    private let good = Array("a good entry\n".utf8)
    private var goodDigest: String { Self.sha256(good) }
    private let rottenName = TestBody.sha256Hex(Array("what the entry held once\n".utf8))
    private let rottenBytes = Array("bytes changed on disk\n".utf8)
    /// The spool's own store: one good entry of another digest, so each answer says which store it read.
    private let own = Array("the spool's own entry\n".utf8)

    private static func sha256(_ bytes: [UInt8]) -> String { TestBody.sha256Hex(bytes) }

    override func setUpWithError() throws {
        spool = try TempSpool()
        elsewhere = try TempSpool.makeScratchFolder(prefix: "store-elsewhere")
        try put(good, as: goodDigest, in: elsewhere)
        try put(rottenBytes, as: rottenName, in: elsewhere)
        try put(own, as: Self.sha256(own), in: spool.root + "/store")
        // Counters, so that `show` has hits to add up in the store elsewhere only.
        try FileManager.default.createDirectory(atPath: elsewhere + "/counters", withIntermediateDirectories: true)
        try Data(#"{"hits":7,"bytesSaved":700}"#.utf8).write(to: URL(fileURLWithPath: elsewhere + "/counters/host-1"))
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: elsewhere) }

    private func put(_ bytes: [UInt8], as digest: String, in store: String) throws {
        let shard = store + "/sha256/" + digest.prefix(2)
        try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: shard + "/" + digest, contents: Data(bytes)))
        XCTAssertEqual(chmod(shard + "/" + digest, 0o444), 0)
    }

    private func cli(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments, environment: environment)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText)
    }

    private func entryExists(_ digest: String, in store: String) -> Bool {
        FileManager.default.fileExists(atPath: store + "/sha256/" + digest.prefix(2) + "/" + digest)
    }

    func testStoreAndStoreShowTakeStoreSpoolAndJSON() throws {
        for command in [["store"], ["store", "show"]] {
            // --store: the store elsewhere (2 entries, 7 hits).
            var r = try cli(command + ["--spool", spool.root, "--store", elsewhere])
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertTrue(r.out.hasPrefix("\(elsewhere!): 2 entries"), "\(command): \(r.out)")
            XCTAssertTrue(r.out.contains("7 hits"), r.out)
            // --spool alone: SPOOL/store (1 entry, no hits).
            r = try cli(command + ["--spool", spool.root])
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertTrue(r.out.hasPrefix("\(spool.root)/store: 1 entries"), "\(command): \(r.out)")
            // --json, with --store.
            r = try cli(command + ["--store", elsewhere, "--json"])
            XCTAssertEqual(r.status, 0, r.err)
            let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], r.out)
            XCTAssertEqual(summary["path"] as? String, elsewhere)
            XCTAssertEqual(summary["entries"] as? Int, 2)
            XCTAssertEqual(summary["hits"] as? Int, 7)
            XCTAssertEqual(summary["bytesSaved"] as? Int, 700)
            // $SPOOLFETCH_SPOOL stands for --spool.
            r = try cli(command + ["--json"], environment: ["SPOOLFETCH_SPOOL": spool.root])
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertTrue(r.out.contains("\"entries\":1"), r.out)
        }
    }

    func testStoreVerifyChecksTheStoreItIsGiven() throws {
        // --spool: the spool's own store, whole.
        var r = try cli(["store", "verify", "--spool", spool.root])
        XCTAssertEqual(r.status, 0, r.err + r.out)
        XCTAssertTrue(r.out.contains("checked 1 entries: 0 removed"), r.out)
        // --store DIR: DIR, with its rotten entry named, the digest its bytes have, removed; exit 1.
        r = try cli(["store", "verify", "--spool", spool.root, "--store", elsewhere])
        XCTAssertEqual(r.status, 1, r.err + r.out)
        XCTAssertTrue(r.out.contains("checked 2 entries: 1 removed, 0 unreadable"), r.out)
        XCTAssertTrue(r.out.contains("removed sha256/\(rottenName.prefix(2))/\(rottenName)"), r.out)
        XCTAssertTrue(r.out.contains(Self.sha256(rottenBytes)), r.out)
        XCTAssertFalse(entryExists(rottenName, in: elsewhere), "the rotten entry is removed")
        XCTAssertTrue(entryExists(goodDigest, in: elsewhere), "the good entry stays")
        // Again: whole now.
        r = try cli(["store", "verify", "--store", elsewhere])
        XCTAssertEqual(r.status, 0, r.err + r.out)
        XCTAssertTrue(r.out.contains("checked 1 entries: 0 removed"), r.out)
        // $SPOOLFETCH_SPOOL stands for --spool.
        r = try cli(["store", "verify"], environment: ["SPOOLFETCH_SPOOL": spool.root])
        XCTAssertEqual(r.status, 0, r.err + r.out)
        XCTAssertTrue(r.out.contains("checked 1 entries"), r.out)
    }

    /// No command declares a long option that one of its parents declares too: swift-argument-parser
    /// gives such an option to the parent, and the subcommand never sees it.
    func testNoSubcommandSharesAnOptionNameWithItsParents() throws {
        let r = try cli(["--experimental-dump-help"])
        XCTAssertEqual(r.status, 0, r.err)
        let info = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
        var checked = 0
        func walk(_ command: [String: Any], path: [String], inherited: Set<String>) {
            var names = Set<String>()
            for argument in (command["arguments"] as? [[String: Any]]) ?? [] {
                for name in (argument["names"] as? [[String: Any]]) ?? [] where name["kind"] as? String == "long" {
                    if let n = name["name"] as? String, n != "help", n != "version" { names.insert(n) }
                }
            }
            let shared = names.intersection(inherited)
            XCTAssertTrue(shared.isEmpty, "\(path.joined(separator: " ")) declares \(shared.sorted()), as a parent does")
            checked += 1
            for sub in (command["subcommands"] as? [[String: Any]]) ?? [] {
                walk(sub, path: path + [sub["commandName"] as? String ?? "?"], inherited: inherited.union(names))
            }
        }
        walk(try XCTUnwrap(info["command"] as? [String: Any]), path: ["spoolfetch"], inherited: [])
        XCTAssertGreaterThanOrEqual(checked, 13, "every command was walked (store show and store verify among them)")
    }
}
