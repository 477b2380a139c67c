import Foundation
import SpoolRequest
import XCTest

/// `segments: N`: how many connections a large body of the item may use at once.
final class SegmentsKeyTests: XCTestCase {
    private func parse(_ text: String) throws -> RequestFile {
        try RequestParser.parse(fileName: "req", bytes: Array(text.utf8), limits: ParseLimits())
    }

    func testDefaultAndItemValues() throws {
        let file = try parse("segments: 4\nhttp://a.example/x\nhttp://a.example/y\nsegments: 1\nhttp://a.example/z\n")
        XCTAssertEqual(file.items.map(\.segments), [4, 1, 4])
        XCTAssertNil(try parse("http://a.example/x\n").items[0].segments)
    }

    func testOutOfRangeOrMalformedIsRejected() {
        for value in ["0", "65", "-1", "two", "1.5", ""] {
            do {
                _ = try parse("http://a.example/x\nsegments: \(value)\n")
                XCTFail("segments: \(value) accepted")
            } catch let error as RequestRejection {
                XCTAssertEqual(error.rule, "bad-segments", "segments: \(value)")
                XCTAssertEqual(error.line, 2)
            } catch {
                XCTFail("\(error)")
            }
        }
    }
}
