import Crypto
import Foundation
import SpoolStore
import XCTest

/// The content store's files: entries by digest made in the publish's durability order and
/// verified before they take their name, LRU eviction, verification, and the claims.
final class ContentStoreUnitTests: StoreTestCase {
    private func hex(_ bytes: [UInt8]) -> String { SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() }

    /// A file in the spool's tmp/ holding `bytes`, open for reading.
    private func source(_ bytes: [UInt8], _ name: String = "src") throws -> Int32 {
        let path = root + "/tmp/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        return fd
    }

    func testAnIngestedBodyIsAReadOnlyEntryNamedByItsDigestAndASecondIngestIsFree() throws {
        let cas = try ContentStore(path: root + "/store")
        let body = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let digest = hex(body)
        let fd = try source(body)
        defer { close(fd) }
        guard case .added = try cas.ingest(from: fd, sourcePath: "src", bytes: Int64(body.count), sha256: digest) else {
            return XCTFail("the first ingest adds the entry")
        }
        XCTAssertEqual(try cas.ingest(from: fd, sourcePath: "src", bytes: Int64(body.count), sha256: digest), .present)
        let path = root + "/store/sha256/" + digest.prefix(2) + "/" + digest
        XCTAssertEqual(cas.entryPath(digest), path)
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o444)
        XCTAssertEqual(cas.size(of: digest), Int64(body.count))
        XCTAssertEqual(files("store/tmp"), [])
        // Out again, into a fresh file: the same bytes.
        let out = open(root + "/tmp/out", O_RDWR | O_CREAT | O_EXCL, 0o644)
        defer { close(out) }
        let copied = try XCTUnwrap(try cas.copy(digest, into: out, outPath: "out"))
        XCTAssertEqual(copied.bytes, Int64(body.count))
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: root + "/tmp/out"))), body)
        // Without a reflink: copy_file_range or reads and writes, the same bytes.
        let plain = open(root + "/tmp/plain", O_RDWR | O_CREAT | O_EXCL, 0o644)
        defer { close(plain) }
        let method = try XCTUnwrap(try cas.copy(digest, into: plain, outPath: "plain", reflink: false)).method
        XCTAssertNotEqual(method, .reflink)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: root + "/tmp/plain"))), body)
        XCTAssertNil(try cas.copy(String(repeating: "0", count: 64), into: plain, outPath: "plain"), "absent: nil")
    }

    func testBytesThatDoNotHashToTheNameNeverBecomeAnEntry() throws {
        let cas = try ContentStore(path: root + "/store")
        let body = Array("the bytes on disk".utf8)
        let claimed = hex(Array("other bytes".utf8))
        let fd = try source(body)
        defer { close(fd) }
        XCTAssertThrowsError(try cas.ingest(from: fd, sourcePath: "src", bytes: Int64(body.count), sha256: claimed)) { error in
            XCTAssertEqual((error as? StoreError)?.call, "verify")
        }
        // Shorter than said: refused too, never a short entry.
        XCTAssertThrowsError(try cas.ingest(from: fd, sourcePath: "src", bytes: Int64(body.count + 10), sha256: hex(body)))
        XCTAssertNil(cas.size(of: claimed))
        XCTAssertEqual(cas.entries(), [])
        XCTAssertEqual(files("store/tmp"), [], "the temp copy is removed")
        XCTAssertThrowsError(try cas.ingest(from: fd, sourcePath: "src", bytes: 1, sha256: "../../etc/passwd"), "only digests name entries")
    }

    func testEvictionRemovesTheLeastRecentlyUsedFirstAndNeverOneInUse() throws {
        let cas = try ContentStore(path: root + "/store")
        var digests: [String] = []
        for i in 0..<4 {
            let body = [UInt8](repeating: UInt8(i), count: 1000)
            let fd = try source(body, "s\(i)")
            defer { close(fd) }
            _ = try cas.ingest(from: fd, sourcePath: "s\(i)", bytes: 1000, sha256: hex(body))
            digests.append(hex(body))
        }
        // Last used: 2, 0, 3, 1 (oldest first), set explicitly.
        for (age, i) in [2, 0, 3, 1].enumerated() {
            var times = [timespec(tv_sec: 1_000_000 + age, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
            XCTAssertEqual(utimensat(AT_FDCWD, cas.entryPath(digests[i]), &times, 0), 0)
        }
        let removed = cas.evict(toFit: 2000, inUse: [digests[2]])
        XCTAssertEqual(removed.map(\.digest), [digests[0], digests[3]], "LRU order, skipping the one in use")
        XCTAssertEqual(Set(cas.entries().map(\.digest)), [digests[2], digests[1]])
        XCTAssertEqual(cas.evict(toFit: 2000, inUse: []), [], "under the bound: nothing goes")
    }

    func testVerifyRemovesAndReportsAnEntryWhoseBytesChanged() throws {
        let cas = try ContentStore(path: root + "/store")
        let good = Array("good".utf8), bad = Array("will rot".utf8)
        for (i, body) in [good, bad].enumerated() {
            let fd = try source(body, "v\(i)")
            defer { close(fd) }
            _ = try cas.ingest(from: fd, sourcePath: "v\(i)", bytes: Int64(body.count), sha256: hex(body))
        }
        let rotten = cas.entryPath(hex(bad))
        chmod(rotten, 0o644)
        try Data("will rut".utf8).write(to: URL(fileURLWithPath: rotten))
        let result = cas.verify()
        XCTAssertEqual(result.checked, 2)
        XCTAssertEqual(result.mismatches.map(\.digest), [hex(bad)])
        XCTAssertEqual(result.mismatches.first?.found, hex(Array("will rut".utf8)))
        XCTAssertNil(cas.size(of: hex(bad)))
        XCTAssertNotNil(cas.size(of: hex(good)))
    }

    func testAClaimIsExclusiveAndOnlyTheStaleClaimSeenIsBroken() throws {
        let cas = try ContentStore(path: root + "/store")
        let digest = hex(Array("x".utf8))
        let claims = StoreClaims(folder: cas.claimsFolder, worker: "w1")
        XCTAssertEqual(try claims.claim(digest, item: "R#0"), .claimed)
        guard case .heldBy(let mine) = try claims.claim(digest, item: "R#1") else { return XCTFail("held") }
        XCTAssertTrue(mine.isMine)
        XCTAssertEqual(mine.item, "R#0")
        claims.release(digest)
        XCTAssertNil(claims.holder(digest))

        // Another machine's claim (a boot id that is not ours): exclusive too, never "gone".
        let foreign = "worker=w2 item=S#4 boot=00000000-0000-0000-0000-000000000000 pidns=1 pid=1\n"
        try Data(foreign.utf8).write(to: URL(fileURLWithPath: root + "/store/claims/" + digest))
        guard case .heldBy(let theirs) = try claims.claim(digest, item: "R#0") else { return XCTFail("held by w2") }
        XCTAssertFalse(theirs.isMine)
        XCTAssertFalse(theirs.isGone)
        XCTAssertEqual(theirs.worker, "w2")
        claims.release(digest)
        XCTAssertNotNil(claims.holder(digest), "release leaves another's claim alone")
        // Renewed after it was seen: not broken.
        var times = [timespec(tv_sec: 2_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, root + "/store/claims/" + digest, &times, 0), 0)
        XCTAssertFalse(claims.breakClaim(digest, seen: theirs))
        XCTAssertNotNil(claims.holder(digest))
        let now = try XCTUnwrap(claims.holder(digest))
        XCTAssertTrue(claims.breakClaim(digest, seen: now))
        XCTAssertNil(claims.holder(digest))
        XCTAssertEqual(files("store/claims"), [])
        XCTAssertEqual(try claims.claim(digest, item: "R#0"), .claimed)
    }

    func testAWorkerTakesOverTheCountersOfThisMachinesWorkersThatAreGone() throws {
        let cas = try ContentStore(path: root + "/store")
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        let gone = child.processIdentifier
        try cas.save(.init(hits: 2, bytesSaved: 10), worker: "h-\(gone)")
        try cas.save(.init(hits: 3, bytesSaved: 20), worker: "h-\(getpid())")    // running: this test
        try cas.save(.init(hits: 5, bytesSaved: 40), worker: "g-\(gone)")       // another machine's
        let before = cas.counters()
        XCTAssertEqual(cas.takeOverCounters(of: "h", into: "h-1"), .init(hits: 2, bytesSaved: 10))
        XCTAssertEqual(files("store/counters"), ["g-\(gone)", "h-1", "h-\(getpid())"].sorted())
        XCTAssertEqual(cas.counters(), before, "nothing counted twice or lost")
        XCTAssertEqual(cas.takeOverCounters(of: "h", into: "h-1"), .init(), "nothing left to take over")
    }

    func testAClaimOfAProcessGoneOnThisMachineIsGone() throws {
        let cas = try ContentStore(path: root + "/store")
        let digest = hex(Array("y".utf8))
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        var st = stat()
        XCTAssertEqual(stat("/proc/self/ns/pid", &st), 0)
        // A child that has exited: its pid names no process.
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        let text = "worker=w3 item=T#0 boot=\(boot) pidns=\(st.st_ino) pid=\(child.processIdentifier)\n"
        try Data(text.utf8).write(to: URL(fileURLWithPath: root + "/store/claims/" + digest))
        let holder = try XCTUnwrap(StoreClaims(folder: cas.claimsFolder, worker: "w1").holder(digest))
        XCTAssertTrue(holder.isGone)
    }
}
