import Foundation
import SpoolTestSupport
import SpoolTransfer
import XCTest

/// `BodyRoom` at the transfer layer, against the real test server: the caller's rules are asked
/// once a body's headers are in and before its first byte is written; their answer cuts the
/// transfer there. A body without a length writes only within the room the rules give it.
final class BodyRoomTests: XCTestCase {
    private var server: TestHTTPServer!
    override func setUpWithError() throws { server = try TestHTTPServer.start() }
    override func tearDownWithError() throws { try? server.shutdown() }

    /// Rules that answer as told and remember what they were asked. For a body of unknown
    /// length they play a filesystem of `unsizedLimit` bytes that holds only the transfer's
    /// file: its room is the limit less what the file holds now (as `statvfs` would say).
    final class Rules: BodyRoomRules {
        var answer: BodyRoomAnswer = .fits
        var unsizedLimit: Int64?
        var othersWriting = false
        var fd: Int32 = -1
        var asked: [(total: Int64, needed: Int64)] = []
        func answer(key: Int, total: Int64, needed: Int64) -> BodyRoomAnswer {
            asked.append((total, needed))
            return answer
        }
        func roomForUnsizedBody(key: Int) -> UnsizedRoom? {
            guard let unsizedLimit else { return nil }
            var figures = stat()
            guard fstat(fd, &figures) == 0 else { return nil }
            return UnsizedRoom(room: unsizedLimit - Int64(figures.st_size), othersWriting: othersWriting,
                               figures: "/x (tmpfs) down to \(unsizedLimit - Int64(figures.st_size)) bytes free")
        }
    }

    private func fetch(_ path: String, rules: Rules) throws -> (TransferOutcome, Int64) {
        let driver = try SessionDriver()
        driver.session.room.rules = rules
        let fd = try SessionDriver.scratchFile()
        defer { close(fd) }
        rules.fd = fd
        try driver.session.start(key: 1, request: TransferRequest(url: server.url(path), destination: fd))
        try driver.run(until: { $0.outcomes[1] != nil }, timeout: 20)
        var figures = stat()
        XCTAssertEqual(fstat(fd, &figures), 0)
        return (try XCTUnwrap(driver.outcomes[1]), Int64(figures.st_size))
    }

    func testASizedBodyIsAskedAboutOnceAndCutBeforeItsFirstByte() throws {
        server.serve("/b", body: TestBody.random(count: 3 << 20, seed: 1))
        let rules = Rules()
        rules.answer = .never("too big for /x")
        let (outcome, size) = try fetch("/b", rules: rules)
        XCTAssertEqual(outcome.failure, .noRoom(never: true, reason: "too big for /x"))
        XCTAssertEqual(rules.asked.map(\.total), [3 << 20])
        XCTAssertEqual(rules.asked.map(\.needed), [3 << 20])
        XCTAssertEqual(size, 0, "no body byte written")
        XCTAssertEqual(outcome.bytesOnDisk, 0)

        rules.answer = .later("not now")
        XCTAssertEqual(try fetch("/b", rules: rules).0.failure, .noRoom(never: false, reason: "not now"))
        rules.answer = .fits
        let (whole, written) = try fetch("/b", rules: rules)
        XCTAssertNil(whole.failure)
        XCTAssertEqual(written, 3 << 20)
    }

    func testABodyWithoutALengthStopsWithinItsRoom() throws {
        server.serve("/c", body: TestBody.random(count: 4 << 20, seed: 2), script: [.chunked])
        let rules = Rules()
        rules.unsizedLimit = 1 << 20
        let (outcome, size) = try fetch("/c", rules: rules)
        guard case .noRoom(true, let why)? = outcome.failure else { return XCTFail("\(String(describing: outcome.failure))") }
        XCTAssertTrue(why.contains("its length is unknown") && why.contains("/x (tmpfs)"), why)
        XCTAssertLessThanOrEqual(size, 1 << 20, "never past its room")
        XCTAssertTrue(rules.asked.isEmpty, "no size to ask about")

        rules.othersWriting = true
        guard case .noRoom(false, _)? = try fetch("/c", rules: rules).0.failure else {
            return XCTFail("with other bodies being written, it waits for space")
        }
        rules.unsizedLimit = 64 << 20
        let (whole, written) = try fetch("/c", rules: rules)
        XCTAssertNil(whole.failure)
        XCTAssertEqual(written, 4 << 20)
    }
}
