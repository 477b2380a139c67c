import Crypto
import Foundation
import SpoolStore
import XCTest

/// A hit's bytes are read and hashed (`StoreHit.swift`): the digest is that of the bytes filled
/// into the part (or of the entry itself), never the entry's name; a rotten entry is removed only
/// while its name still holds the inode that was read.
final class StoreHitTests: StoreTestCase {
    private func hex(_ bytes: [UInt8]) -> String { SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() }

    /// Writes `bytes` as the entry named `digest`, read-only (what bit rot or a stray `dd` leaves).
    private func plant(_ bytes: [UInt8], as digest: String) throws {
        let shard = root + "/store/sha256/" + digest.prefix(2)
        try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: shard + "/" + digest))
        XCTAssertEqual(chmod(shard + "/" + digest, 0o444), 0)
    }

    func testAFilledPartAndAnEntryAreHashedFromTheirBytes() throws {
        let cas = try ContentStore(path: root + "/store")
        let good = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var rotten = good
        rotten[150_000] ^= 1
        let name = hex(good)
        try plant(rotten, as: name)
        let entry = try XCTUnwrap(try cas.openEntry(name))
        let out = open(root + "/tmp/part", O_RDWR | O_CREAT | O_EXCL, 0o644)
        defer { close(out) }
        let filled = try cas.fill(entry, into: out, outPath: "part")
        XCTAssertEqual(filled.sha256, hex(rotten), "the digest of the bytes in the part, not the entry's name")
        XCTAssertEqual(filled.bytes, Int64(good.count))
        XCTAssertNotNil(filled.method)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: root + "/tmp/part"))), rotten)
        let hashed = try withExtendedLifetime(entry) { try cas.hashEntry(entry.fd, digest: name) }
        XCTAssertEqual(hashed.sha256, hex(rotten))
        XCTAssertNil(hashed.method, "the entry itself (hardlink)")
        XCTAssertNil(try cas.openEntry(hex(Array("absent".utf8))), "absent: nil")
    }

    func testARottenEntryIsRemovedOnlyWhileItsNameHoldsTheInodeRead() throws {
        let cas = try ContentStore(path: root + "/store")
        let good = Array("the good body".utf8)
        let name = hex(good)
        try plant(Array("the rotten body".utf8), as: name)
        let rotten = try XCTUnwrap(try cas.openEntry(name))
        XCTAssertTrue(cas.removeRotten(name, inode: rotten.inode))
        XCTAssertFalse(cas.contains(name), "removed")
        // A good entry put in meanwhile (another worker's fetch) under the same name stays.
        let path = root + "/tmp/src"
        try Data(good).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        _ = try cas.ingest(from: fd, sourcePath: path, bytes: Int64(good.count), sha256: name)
        XCTAssertTrue(cas.removeRotten(name, inode: rotten.inode), "the rotten inode is no longer under the name")
        XCTAssertTrue(cas.contains(name), "the good entry is not removed")
        let now = try XCTUnwrap(try cas.openEntry(name))
        XCTAssertEqual(try withExtendedLifetime(now) { try cas.hashEntry(now.fd, digest: name) }.sha256, name)
    }
}
