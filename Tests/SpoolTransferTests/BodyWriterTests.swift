import Crypto
import Foundation
import SpoolTestSupport
@testable import SpoolTransfer
import XCTest

/// The writer thread of large bodies (`BodyWriter`): every byte handed over lands at its offset
/// and in the hash, in order, whatever the chunk sizes; `finish` covers exactly what is on disk;
/// a failed write is reported to the engine without hanging it; writeback is started every 8 MiB.
final class BodyWriterTests: XCTestCase {
    /// The file's first `count` bytes.
    private func contents(_ fd: Int32, count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count + 1)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return Array(bytes[0..<max(0, n)])
    }

    /// Hands `body[from...]` over in chunks of varying sizes (1 byte to past a block), as libcurl
    /// would; returns the first non-zero errno an append reported.
    private func append(_ body: [UInt8], from start: Int, to writer: BodyWriter) -> Int32 {
        let sizes = [1, 16_384, 300_000, 7, 262_144, 65_536, 100_003]
        var offset = start, turn = 0
        while offset < body.count {
            let n = min(sizes[turn % sizes.count], body.count - offset)
            let error = body.withUnsafeBytes { writer.append(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + n]),
                                                             at: Int64(offset)) }
            if error != 0 { return error }
            offset += n
            turn += 1
        }
        return 0
    }

    /// `body` through a writer from byte 0 into a scratch file, then `finish`: checks that no
    /// write failed and every byte was counted; returns the hash state, where the range not yet
    /// handed to writeback starts, and the file's contents.
    private func writeWhole(_ body: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws
        -> (sha: SHA256, writebackFrom: Int64, onDisk: [UInt8]) {
        let fd = try SessionDriver.scratchFile()
        defer { close(fd) }
        let writer = BodyWriter(fd: fd, sha: SHA256(), from: 0, writebackFrom: 0)
        XCTAssertEqual(append(body, from: 0, to: writer), 0, file: file, line: line)
        let (sha, written, error, writebackFrom) = writer.finish()
        XCTAssertEqual(error, 0, file: file, line: line)
        XCTAssertEqual(written, Int64(body.count), "finish covers every byte handed over, the partial last block too",
                       file: file, line: line)
        return (sha, writebackFrom, contents(fd, count: body.count))
    }

    func testEveryByteLandsAtItsOffsetAndInTheHashInOrder() throws {
        let body = TestBody.random(count: (3 << 20) + 12_345, seed: 41)
        let (sha, _, onDisk) = try writeWhole(body)
        XCTAssertEqual(onDisk, body)
        XCTAssertEqual(Hex.encode(sha.finalize()), TestBody.sha256Hex(body))
    }

    /// A write that fails partway (the file-size limit, `EFBIG`, as a disk filling up gives
    /// `ENOSPC` after some blocks went through): `finish` counts only the blocks written whole,
    /// and the hash covers exactly those bytes, never the block that failed. That is what a
    /// resume starts from.
    func testAWriteFailingPartwayLeavesTheHashCoveringExactlyTheBytesWritten() throws {
        let fd = try SessionDriver.scratchFile()
        defer { close(fd) }
        let body = TestBody.random(count: 6 << 20, seed: 47)
        let limit = (2 << 20) + 12_345
        let (error, written, sha) = try withFileSizeLimit(limit) { () -> (Int32, Int64, SHA256) in
            let writer = BodyWriter(fd: fd, sha: SHA256(), from: 0, writebackFrom: 0)
            _ = append(body, from: 0, to: writer)
            let (sha, written, error, _) = writer.finish()
            return (error, written, sha)
        }
        XCTAssertEqual(error, EFBIG)
        XCTAssertGreaterThan(written, 0, "the blocks before the limit were written")
        XCTAssertLessThanOrEqual(written, Int64(limit))
        let prefix = Array(body[0..<Int(written)])
        XCTAssertEqual(Hex.encode(sha.finalize()), TestBody.sha256Hex(prefix))
        // The block that crossed the limit may have left some of its bytes past `written`.
        XCTAssertTrue(contents(fd, count: Int(written)).prefix(Int(written)).elementsEqual(prefix),
                      "the counted bytes are on disk")
    }

    /// Runs `body` with this process's file-size limit at `bytes` (SIGXFSZ ignored, so a write
    /// past it fails with EFBIG), then puts both back.
    private func withFileSizeLimit<T>(_ bytes: Int, _ body: () throws -> T) throws -> T {
        var old = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_FSIZE.rawValue), &old), 0)
        let oldHandler = signal(SIGXFSZ, SIG_IGN)
        var limited = old
        limited.rlim_cur = rlim_t(bytes)
        XCTAssertEqual(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limited), 0)
        defer {
            _ = setrlimit(Int32(RLIMIT_FSIZE.rawValue), &old)
            _ = signal(SIGXFSZ, oldHandler)
        }
        return try body()
    }

    /// A chunk that arrives while the thread is idle goes to it at once, part-filled block and
    /// all: a slow body's bytes follow it onto the disk (what `--max-rate`'s end-to-end test and
    /// a part's size in `status` rely on) instead of waiting in memory for 256 KiB to gather.
    func testAChunkGoesToAnIdleThreadAtOnce() throws {
        let fd = try SessionDriver.scratchFile()
        defer { close(fd) }
        let body = TestBody.random(count: 20_000, seed: 45)
        let writer = BodyWriter(fd: fd, sha: SHA256(), from: 0, writebackFrom: 0)
        XCTAssertEqual(body.withUnsafeBytes { writer.append($0, at: 0) }, 0)
        XCTAssertEqual(writer.bytesHandedOver, 20_000, "handed over before its block is full")
        let (sha, written, error, _) = writer.finish()
        XCTAssertEqual(error, 0)
        XCTAssertEqual(written, 20_000)
        XCTAssertEqual(contents(fd, count: body.count), body)
        XCTAssertEqual(Hex.encode(sha.finalize()), TestBody.sha256Hex(body))
    }

    /// A writer takes over after the engine wrote and hashed a prefix (the first 128 KiB of an
    /// attempt, or a resumed partial): the digest covers prefix and rest.
    func testContinuesFromAPrefixAndItsHashState() throws {
        let fd = try SessionDriver.scratchFile()
        defer { close(fd) }
        let body = TestBody.random(count: 1 << 20, seed: 42)
        let prefix = 131_072 + 99
        XCTAssertEqual(body.withUnsafeBytes { pwrite(fd, $0.baseAddress, prefix, 0) }, prefix)
        var sha = SHA256()
        body.withUnsafeBytes { sha.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<prefix])) }
        let writer = BodyWriter(fd: fd, sha: sha, from: Int64(prefix), writebackFrom: 0)
        XCTAssertEqual(append(body, from: prefix, to: writer), 0)
        let (state, written, error, _) = writer.finish()
        XCTAssertEqual(error, 0)
        XCTAssertEqual(written, Int64(body.count))
        XCTAssertEqual(contents(fd, count: body.count), body)
        XCTAssertEqual(Hex.encode(state.finalize()), TestBody.sha256Hex(body))
    }

    /// The write fails on the thread (a descriptor opened read-only: `EBADF`, as a full disk
    /// gives `ENOSPC`): the engine hears the errno from `append` — more than the blocks that may
    /// wait are handed over, so a writer that stopped taking blocks without saying so would hang
    /// here — and `finish` says no byte of this writer made it.
    func testAFailedWriteIsReportedWithItsErrnoAndNothingIsCounted() throws {
        let path = NSTemporaryDirectory() + "bodywriter-\(UUID().uuidString)"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let body = TestBody.random(count: 4 << 20, seed: 43)
        let writer = BodyWriter(fd: fd, sha: SHA256(), from: 0, writebackFrom: 0)
        XCTAssertEqual(append(body, from: 0, to: writer), EBADF)
        let (_, written, error, _) = writer.finish()
        XCTAssertEqual(error, EBADF)
        XCTAssertEqual(written, 0)
    }

    /// Every 8 MiB written, the range goes to writeback, from where the engine last handed it
    /// over; `finish` tells where the range not yet handed over starts (the tail is the
    /// transfer's to hint).
    func testWritebackIsStartedEveryEightMebibytes() throws {
        let body = TestBody.random(count: (9 << 20) + 5, seed: 44)
        let (_, writebackFrom, onDisk) = try writeWhole(body)
        XCTAssertEqual(onDisk, body)
        // Blocks may be part-filled (handed over while the thread was idle), so the hint falls
        // at the first block end at or past 8 MiB, and only once in 9 MiB.
        XCTAssertGreaterThanOrEqual(writebackFrom, 8 << 20)
        XCTAssertLessThan(writebackFrom, (8 << 20) + Int64(BodyWriter.blockSize))
    }

    /// Every `syncEvery` bytes the file is synced off the thread, and `durableBytes` says how far;
    /// `finish` waits for a sync under way (the caller closes the descriptor after it). Before
    /// the first one, the prefix the caller synced counts; with no interval, nothing more does.
    func testCheckpointsSayHowMuchIsDurableAndFinishWaitsForThem() throws {
        let body = TestBody.random(count: (3 << 20) + 777, seed: 45)
        let fd = try SessionDriver.scratchFile()
        defer { close(fd) }
        let writer = BodyWriter(fd: fd, sha: SHA256(), from: 0, writebackFrom: 0, durableFrom: 0, syncEvery: 1 << 20)
        XCTAssertEqual(writer.durableBytes, 0)
        XCTAssertEqual(append(body, from: 0, to: writer), 0)
        let (_, written, error, _) = writer.finish()
        XCTAssertEqual(error, 0)
        XCTAssertEqual(written, Int64(body.count))
        XCTAssertGreaterThanOrEqual(writer.durableBytes, 1 << 20, "at least the first checkpoint, which finish waited for")
        XCTAssertLessThanOrEqual(writer.durableBytes, written)

        let prefix = 500_000
        let resumed = BodyWriter(fd: fd, sha: SHA256(), from: Int64(prefix), writebackFrom: Int64(prefix),
                                 durableFrom: Int64(prefix), syncEvery: 0)
        XCTAssertEqual(resumed.durableBytes, Int64(prefix), "the synced prefix of a resume")
        XCTAssertEqual(append(Array(body[0..<(2 << 20)]), from: prefix, to: resumed), 0)
        _ = resumed.finish()
        XCTAssertEqual(resumed.durableBytes, Int64(prefix), "no interval: no checkpoint")
    }
}
