import Foundation
import XCTest
import SpoolRequest
@testable import SpoolStore

/// The retry's request file is written from the failed request's bytes (`FailedRetry.retryBytes`),
/// line by line without strings: these rows pin what it keeps, drops and adds.
final class RetryTextTests: XCTestCase {
    private func retry(_ text: String, keeping: Set<Int>, deadline: String? = nil,
                       now: Date = Date(timeIntervalSince1970: 1_900_000_000)) throws -> (text: String, dropped: [String]) {
        let bytes = Array(text.utf8)
        let index = try RequestParser.index(fileName: "r", bytes: bytes)
        let kept = index.items.filter { keeping.contains(Int($0.index)) }.map { (Int($0.offset), Int($0.length)) }
        let out = FailedRetry.retryBytes(of: bytes, itemsFrom: Int(index.items.first!.offset), kept: kept, group: index.group,
                                         request: "r", deadline: deadline, now: now)
        return (String(decoding: out.bytes, as: UTF8.self), out.droppedDeadlines)
    }

    func testKeepsTheHeaderAndTheKeptItemsLinesAsWrittenWithCRLFMadeLF() throws {
        let text = "# mine\r\npriority: high\r\nurl: http://h/a\r\nname: a\r\n\r\nurl: http://h/b\r\nname: b\r\n# after b\r\nurl: http://h/c\r\n"
        let out = try retry(text, keeping: [1, 2])
        XCTAssertEqual(out.text, "# retry of failed/r\ngroup: r\n# mine\npriority: high\n"
                       + "url: http://h/b\nname: b\n# after b\nurl: http://h/c\n")
        XCTAssertEqual(out.dropped, [])
    }

    func testAGroupTheFileNamesIsNotAddedAgainWhateverItsCaseAndBlanks() throws {
        let out = try retry("  GROUP :  g1\nurl: http://h/a\n", keeping: [0])
        XCTAssertEqual(out.text, "# retry of failed/r\n  GROUP :  g1\nurl: http://h/a\n")
    }

    func testAPassedAbsoluteDeadlineIsDroppedAndARelativeOneKept() throws {
        let text = "Deadline : 2020-01-01T00:00:00Z\nurl: http://h/a\n deadline: 6h\nurl: http://h/b\ndeadline:2020-01-01T00:00:00Z\n"
        let out = try retry(text, keeping: [0, 1])
        XCTAssertEqual(out.text, "# retry of failed/r\ngroup: r\n# deadline: 2020-01-01T00:00:00Z had passed (dropped by retry)\n"
                       + "url: http://h/a\n deadline: 6h\nurl: http://h/b\n# deadline: 2020-01-01T00:00:00Z had passed (dropped by retry)\n")
        XCTAssertEqual(out.dropped, ["2020-01-01T00:00:00Z"], "one value, listed once")
    }

    func testRetryDeadlineReplacesEveryDeadlineLine() throws {
        let out = try retry("deadline: 6h\nurl: http://h/a\ndeadline: 2h\n", keeping: [0], deadline: "1d")
        XCTAssertEqual(out.text, "# retry of failed/r\ngroup: r\ndeadline: 1d\n# deadline: 6h (replaced by retry --deadline)\n"
                       + "url: http://h/a\n# deadline: 2h (replaced by retry --deadline)\n")
    }

    func testAKeyIsMatchedOnlyWhenItIsTheWholeKey() {
        let lines = ["deadline: x", "\tDEADLINE\t: x", "deadlines: x", "dead line: x", "deadline x", "deadline", "x: deadline:"]
        let found = lines.map { line -> Bool in
            let bytes = Array(line.utf8)
            return RetryLines.key(bytes, 0, bytes.count, is: "deadline")
        }
        XCTAssertEqual(found, [true, true, false, false, false, false, false])
    }
}
