import Crypto
import Foundation
import SpoolTestSupport
@testable import SpoolTransfer
import XCTest

/// A small body left for the caller to write (`TransferRequest.writeBehind`): handed over whole
/// on success, written to the file by the transfer itself on any other ending, and written as it
/// arrives when it is not announced small.
final class WriteBehindTests: XCTestCase {
    private var server: TestHTTPServer!
    private let body = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }

    override func setUpWithError() throws { server = try TestHTTPServer.start() }
    override func tearDownWithError() throws { try? server.shutdown() }

    /// Runs one transfer of `path` into a fresh scratch file; returns its outcome and the file's bytes.
    private func fetch(_ path: String, writeBehind: Bool = true) throws -> (TransferOutcome, [UInt8]) {
        let driver = try SessionDriver()
        let fd = try SessionDriver.scratchFile()
        defer { close(fd) }
        try driver.session.start(key: 1, request: TransferRequest(url: server.url(path), destination: fd,
                                                                   writeBehind: writeBehind))
        try driver.run(until: { $0.outcomes[1] != nil }, timeout: 20)
        let outcome = try XCTUnwrap(driver.outcomes[1], "no outcome for \(path)")
        var onDisk = [UInt8](repeating: 0, count: 512 << 10)
        let n = onDisk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        XCTAssertGreaterThanOrEqual(n, 0)
        return (outcome, Array(onDisk[0..<max(0, n)]))
    }

    private func hex(_ bytes: some Sequence<UInt8>) -> String {
        SHA256.hash(data: Array(bytes)).map { String(format: "%02x", $0) }.joined()
    }

    func testASmallBodyIsHandedOverUnwrittenWithItsDigest() throws {
        server.serve("/small", body: body)
        let heldBefore = WriteBehind.budget.held
        var (outcome, onDisk) = try fetch("/small")
        XCTAssertNil(outcome.failure)
        XCTAssertEqual(onDisk, [], "nothing written: the caller writes it")
        XCTAssertEqual(outcome.unwritten?.offset, 0)
        XCTAssertEqual(outcome.unwritten.map { hex($0.bytes) }, hex(body))
        XCTAssertEqual(outcome.bytesOnDisk, Int64(body.count))
        XCTAssertEqual(outcome.sha256, hex(body))
        XCTAssertEqual(WriteBehind.budget.held, heldBefore + body.count, "held while the bytes are")
        outcome.unwritten = nil
        XCTAssertEqual(WriteBehind.budget.held, heldBefore, "given back with them")
    }

    func testWithoutWriteBehindTheBodyIsInTheFile() throws {
        server.serve("/small", body: body)
        let (outcome, onDisk) = try fetch("/small", writeBehind: false)
        XCTAssertNil(outcome.failure)
        XCTAssertNil(outcome.unwritten)
        XCTAssertEqual(hex(onDisk), hex(body))
    }

    /// A body cut short keeps its partial on disk for a resume: the bytes, the count and the
    /// hash state all agree.
    func testACutBodyIsWrittenBeforeItsOutcome() throws {
        server.serve("/cut", body: body, script: [.cut(afterBytes: 5_000)])
        let heldBefore = WriteBehind.budget.held
        let (outcome, onDisk) = try fetch("/cut")
        XCTAssertNotNil(outcome.failure)
        XCTAssertNil(outcome.unwritten)
        XCTAssertEqual(onDisk.count, 5_000)
        XCTAssertEqual(hex(onDisk), hex(body[0..<5_000]))
        XCTAssertEqual(outcome.bytesOnDisk, 5_000)
        XCTAssertEqual(outcome.hashState.hexDigest, hex(body[0..<5_000]))
        XCTAssertEqual(WriteBehind.budget.held, heldBefore)
    }

    func testABodyAnnouncedAtTheLimitIsWrittenAsItArrives() throws {
        let large = (0..<Int(WriteBehind.limit)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
        server.serve("/large", body: large)
        let heldBefore = WriteBehind.budget.held
        let (outcome, onDisk) = try fetch("/large")
        XCTAssertNil(outcome.failure)
        XCTAssertNil(outcome.unwritten, "\(large.count) bytes is not small")
        XCTAssertEqual(hex(onDisk), hex(large))
        XCTAssertEqual(outcome.sha256, hex(large))
        XCTAssertEqual(WriteBehind.budget.held, heldBefore)
    }

    /// With the budget taken (a slow disk with many bodies waiting), a small body is written as it
    /// arrives instead of adding to memory.
    func testASmallBodyIsWrittenAsItArrivesWhenTheBudgetIsTaken() throws {
        server.serve("/small", body: body)
        let free = WriteBehind.budget.capacity - WriteBehind.budget.held
        let leave = body.count - 1
        XCTAssertTrue(WriteBehind.budget.reserve(free - leave))
        defer { WriteBehind.budget.release(free - leave) }
        let (outcome, onDisk) = try fetch("/small")
        XCTAssertNil(outcome.failure)
        XCTAssertNil(outcome.unwritten, "no room for \(body.count) bytes")
        XCTAssertEqual(hex(onDisk), hex(body))
        XCTAssertEqual(outcome.sha256, hex(body))
        XCTAssertEqual(WriteBehind.budget.capacity - WriteBehind.budget.held, leave, "nothing taken")
    }

    func testABodyWithoutContentLengthIsWrittenAsItArrives() throws {
        server.serve("/chunked", body: body, script: [.chunked])
        let (outcome, onDisk) = try fetch("/chunked")
        XCTAssertNil(outcome.failure)
        XCTAssertNil(outcome.unwritten)
        XCTAssertEqual(hex(onDisk), hex(body))
        XCTAssertEqual(outcome.sha256, hex(body))
    }
}
