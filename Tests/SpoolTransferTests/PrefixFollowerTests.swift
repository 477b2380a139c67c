import Crypto
import Foundation
import SpoolTestSupport
@testable import SpoolTransfer
import XCTest

/// The hash that follows a segmented body's contiguous prefix (`PrefixFollower`) and the pieces
/// that make the prefix grow (`SegmentSet.takePiece`, `learn`): ranges finished in any order are
/// hashed in file order, never past a gap, and the digest is the whole file's.
final class PrefixFollowerTests: XCTestCase {
    private var fd: Int32 = -1
    private var path = ""

    override func setUpWithError() throws {
        path = NSTemporaryDirectory() + "prefix-follower-\(getpid())-\(UUID().uuidString)"
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
    }

    override func tearDown() {
        close(fd)
        unlink(path)
    }

    private func write(_ body: [UInt8]) {
        let n = body.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        XCTAssertEqual(n, body.count)
    }

    /// Runs `follower` to `total` and returns its digest (bounded: 30 s).
    private func digest(_ follower: PrefixFollower, total: Int64) throws -> String {
        let box = ResultBox()
        follower.finish(total: total) { box.set($0) }
        let result = try XCTUnwrap(box.wait(timeout: 30), "the follower reported within 30 s")
        return try result.get().0
    }

    func testRangesFinishedOutOfOrderGiveTheWholeFilesDigest() throws {
        let body = TestBody.random(count: 9 << 20, seed: 63)
        write(body)
        let prefix = 1 << 20
        var sha = SHA256()
        body.withUnsafeBytes { sha.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<prefix])) }
        let follower = PrefixFollower(fd: fd, from: Int64(prefix), sha: sha)
        // Pieces of 1 MiB after the prefix, finished in a scrambled order, one of them in two parts.
        let order = [5, 2, 8, 1, 4, 7, 3, 6]
        for i in order {
            let from = Int64(i) << 20
            if i == 4 {
                follower.add(from: from + 300_000, to: from + (1 << 20))
                follower.add(from: from, to: from + 300_000)
            } else {
                follower.add(from: from, to: from + (1 << 20))
            }
        }
        XCTAssertEqual(try digest(follower, total: Int64(body.count)), TestBody.sha256Hex(body))
    }

    func testTheHashStopsAtAGapAndGoesOnWhenItIsFilled() throws {
        let body = TestBody.random(count: 4 << 20, seed: 64)
        write(body)
        let follower = PrefixFollower(fd: fd, from: 0, sha: SHA256())
        follower.add(from: 0, to: 1 << 20)
        follower.add(from: 2 << 20, to: 4 << 20)
        XCTAssertTrue(follower.waitUntilHashed(1 << 20, timeout: 30), "the first range is hashed before the end")
        // Nothing past the gap: the follower is idle at 1 MiB (it only moves when a range is added).
        XCTAssertFalse(follower.waitUntilHashed((1 << 20) + 1, timeout: 0.2), "nothing hashed past the gap")
        XCTAssertEqual(follower.hashedBytes, 1 << 20)
        follower.add(from: 1 << 20, to: 2 << 20)
        XCTAssertTrue(follower.waitUntilHashed(4 << 20, timeout: 30), "the whole body once the gap is filled, before finish")
        XCTAssertEqual(try digest(follower, total: Int64(body.count)), TestBody.sha256Hex(body))
    }

    func testAFileShorterThanItsRangesIsAReadErrorNotADigest() throws {
        write(TestBody.random(count: 1 << 20, seed: 65))
        let follower = PrefixFollower(fd: fd, from: 0, sha: SHA256())
        follower.add(from: 0, to: 2 << 20)
        let box = ResultBox()
        follower.finish(total: 2 << 20) { box.set($0) }
        let result = try XCTUnwrap(box.wait(timeout: 30))
        guard case .failure(let error) = result else { return XCTFail("a digest of bytes that are not there") }
        XCTAssertEqual(error.errno, EIO)
    }

    func testACancelledFollowerNeverReports() throws {
        write(TestBody.random(count: 1 << 20, seed: 66))
        let follower = PrefixFollower(fd: fd, from: 0, sha: SHA256())
        follower.cancel()
        let box = ResultBox()
        follower.finish(total: 1 << 20) { box.set($0) }
        follower.add(from: 0, to: 1 << 20)
        XCTAssertNil(box.wait(timeout: 0.5), "no digest after cancel")
    }

    /// Pieces are carved in order from the first pending range, never more than half of what is
    /// pending per connection (so the last ones shrink), and a rest under the minimum goes with
    /// the last piece.
    func testPiecesAreHandedOutInOrderAndShrinkTowardsTheEnd() throws {
        let set = SegmentSet(primary: try primaryStub(), total: 10 << 20)
        set.pending = [(1 << 20, 10 << 20)]
        set.pieceSize = 4 << 20
        let take = { set.takePiece(minimum: 1 << 20, share: 1).map { [$0.from, $0.to] } }
        XCTAssertEqual(take(), [1 << 20, 5 << 20], "the piece size")
        XCTAssertEqual(take(), [5 << 20, 15 << 19], "half of the 5 MiB pending")
        XCTAssertEqual(take(), [15 << 19, 35 << 18], "half of the 2.5 MiB pending")
        XCTAssertEqual(take(), [35 << 18, 10 << 20], "at least the minimum, and a shorter rest goes with it")
        XCTAssertNil(take())
        XCTAssertTrue(set.pending.isEmpty)
    }

    /// In `B.state` a piece not yet handed out is the missing tail of the range before it: a
    /// restart reads each range's `done` as a length the part must have, and a pending piece past
    /// the part's end made it drop every kept range (`SegmentedTransferTests`' kill -9 tests).
    func testAPendingPieceJoinsTheRangeBeforeItInTheState() throws {
        let set = SegmentSet(primary: try primaryStub(), total: 10 << 20)
        set.primaryRunning = false
        set.doneRanges = [(2 << 20, 4 << 20, 3 << 20)]
        set.pending = [(1 << 20, 2 << 20), (4 << 20, 10 << 20)]
        XCTAssertEqual(set.extents.ranges, [[1 << 20, 1 << 20, 2 << 20, 1 << 20], [2 << 20, 4 << 20, 10 << 20, 3 << 20]])
    }

    /// A server that lets short requests through and holds long ones to its rate: once a larger
    /// piece comes at under a quarter of the fastest pace, pieces stay at the largest fast size. A
    /// path whose pace does not depend on the size grows them to the maximum.
    func testPiecesStayWithinARequestsAllowanceOnceAPaceDropShowsIt() throws {
        let throttled = SegmentSet(primary: try primaryStub(), total: 64 << 20)
        throttled.pieceSize = 2 << 20
        throttled.learn(size: 2 << 20, seconds: 0.01, firstByte: 0.001, minimum: 1 << 20)
        XCTAssertEqual(throttled.pieceSize, 4 << 20, "fast: pieces double")
        throttled.learn(size: 4 << 20, seconds: 0.5, firstByte: 0.001, minimum: 1 << 20)
        XCTAssertEqual(throttled.ceiling, 2 << 20)
        XCTAssertEqual(throttled.pieceSize, 2 << 20, "the allowance learnt: pieces stay within it")
        throttled.learn(size: 2 << 20, seconds: 0.01, firstByte: 0.001, minimum: 1 << 20)
        XCTAssertEqual(throttled.pieceSize, 2 << 20)

        let steady = SegmentSet(primary: try primaryStub(), total: 256 << 20)
        steady.pieceSize = 2 << 20
        for size in [2, 4, 8, 8] as [Int64] {
            steady.learn(size: size << 20, seconds: Double(size) * 0.25, firstByte: 0.001, minimum: 1 << 20)
        }
        XCTAssertNil(steady.ceiling)
        XCTAssertEqual(steady.pieceSize, SegmentSet.maximumPiece)
    }

    /// A transfer to stand for the primary (never started: only its key is read here).
    private func primaryStub() throws -> Transfer {
        let request = TransferRequest(url: "http://127.0.0.1:9/x", destination: fd)
        return Transfer(key: 1, easy: try EasyHandle(), request: request, proxies: ProxyEnvironment([:]), gate: RateGate())
    }
}

/// One result handed from the follower's thread, waited for with a deadline.
private final class ResultBox: @unchecked Sendable {
    private let condition = NSCondition()
    private var result: Result<(String, HashState), PrefixReadError>?

    func set(_ value: Result<(String, HashState), PrefixReadError>) {
        condition.lock(); result = value; condition.broadcast(); condition.unlock()
    }

    func wait(timeout: Double) -> Result<(String, HashState), PrefixReadError>? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while result == nil { if !condition.wait(until: deadline) { break } }
        return result
    }
}
