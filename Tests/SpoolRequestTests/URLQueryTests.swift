import SpoolRequest
import XCTest

final class URLQueryTests: XCTestCase {
    func testStrippedCutsTheQueryAndFragment() {
        XCTAssertEqual(URLQuery.stripped("https://h/a/b?x=1&y=2"), "https://h/a/b")
        XCTAssertEqual(URLQuery.stripped("https://h/a#f?x"), "https://h/a")
        XCTAssertEqual(URLQuery.stripped("https://h:8443?x"), "https://h:8443")
        XCTAssertEqual(URLQuery.stripped("https://h/a"), "https://h/a")
    }

    func testQueryIsTheTextBetweenTheMarkAndAnyFragment() {
        XCTAssertEqual(URLQuery.query(of: "https://h/a?x=1&y=2#frag"), "x=1&y=2")
        XCTAssertEqual(URLQuery.query(of: "https://h/a?"), "")
        XCTAssertNil(URLQuery.query(of: "https://h/a"))
        XCTAssertNil(URLQuery.query(of: "https://h/a#f?x=1"), "a ? inside the fragment is no query")
    }

    func testParametersAreDecodedInOrder() {
        let p = URLQuery.parameters(of: "https://h/a?X-Amz-Date=20261126T210000Z&X-Amz-Credential=AKIA%2F2026&flag&e=")
        XCTAssertEqual(p.map(\.name), ["X-Amz-Date", "X-Amz-Credential", "flag", "e"])
        XCTAssertEqual(p.map(\.value), ["20261126T210000Z", "AKIA/2026", "", ""])
        XCTAssertTrue(URLQuery.parameters(of: "https://h/a").isEmpty)
    }
}
