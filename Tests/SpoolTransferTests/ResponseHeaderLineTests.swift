@testable import SpoolTransfer
import XCTest

/// The header lines libcurl hands the header callback, one by one, as `ResponseFacts` reads
/// them: the status line (HTTP/1.1 and HTTP/2 forms, a redirect before the final response)
/// and the byte-level reading of `Accept-Ranges`.
final class ResponseHeaderLineTests: XCTestCase {
    private func facts(_ lines: [String]) -> ResponseFacts {
        var facts = ResponseFacts()
        for line in lines {
            let bytes = Array(line.utf8)
            bytes.withUnsafeBufferPointer { facts.take(headerLine: $0) }
        }
        return facts
    }

    func testTheStatusLineGivesTheCodeAndTheProtocol() {
        XCTAssertEqual(facts(["HTTP/1.1 206 Partial Content\r\n"]).httpStatus, 206)
        XCTAssertFalse(facts(["HTTP/1.1 200 OK\r\n"]).multiplexed)
        let h2 = facts(["HTTP/2 200\r\n"])
        XCTAssertEqual(h2.httpStatus, 200)
        XCTAssertTrue(h2.multiplexed)
        XCTAssertEqual(facts(["HTTP/1.1 404\r\n"]).httpStatus, 404)
        // No code, or one that is not a number: none taken.
        XCTAssertEqual(facts(["HTTP/1.1\r\n"]).httpStatus, 0)
        XCTAssertEqual(facts(["HTTP/1.1 2x0 Odd\r\n"]).httpStatus, 0)
        // A redirect's response, then the final one: the final one's code, one redirect counted.
        let redirected = facts(["HTTP/1.1 302 Found\r\n", "Location: http://h/b\r\n", "\r\n", "HTTP/1.1 200 OK\r\n"])
        XCTAssertEqual(redirected.httpStatus, 200)
        XCTAssertEqual(redirected.redirects, 1)
        XCTAssertNil(redirected.location)
    }

    func testAcceptRangesNamesBytesInAnyCase() {
        XCTAssertTrue(facts(["HTTP/1.1 200 OK\r\n", "Accept-Ranges: bytes\r\n"]).acceptsRanges)
        XCTAssertTrue(facts(["HTTP/1.1 200 OK\r\n", "accept-ranges:BYTES\r\n"]).acceptsRanges)
        XCTAssertTrue(facts(["HTTP/1.1 200 OK\r\n", "Accept-Ranges: none, Bytes \r\n"]).acceptsRanges)
        XCTAssertFalse(facts(["HTTP/1.1 200 OK\r\n", "Accept-Ranges: none\r\n"]).acceptsRanges)
        XCTAssertFalse(facts(["HTTP/1.1 200 OK\r\n", "Accept-Ranges: byte\r\n"]).acceptsRanges)
        XCTAssertFalse(facts(["HTTP/1.1 200 OK\r\n", "Accept-Ranges:\r\n"]).acceptsRanges)
    }
}
