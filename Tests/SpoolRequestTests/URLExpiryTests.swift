import Foundation
import SpoolRequest
import XCTest

/// One row per form of the README's table "When a URL expires".
final class URLExpiryTests: XCTestCase {
    private func at(_ text: String) -> Date { RFC3339.parse(text)! }

    func testEachSignedURLFormGivesItsExpiry() {
        let rows: [(String, String, URLExpiry.Form)] = [
            ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261126%2Fus-east-1%2Fs3%2Faws4_request"
             + "&X-Amz-Date=20261126T210000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=ab12",
             "2026-11-26T22:00:00Z", .s3SigV4),
            ("https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=20261126T210000Z"
             + "&X-Goog-Expires=604800&X-Goog-Signature=cd34", "2026-12-03T21:00:00Z", .gcsV4),
            ("https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKIA&Expires=1795000000&Signature=x%2By", "2026-11-18T11:06:40Z", .expiresEpoch),
            ("https://d1.cloudfront.net/v.mp4?Expires=1795000000&Signature=abc~&Key-Pair-Id=K2", "2026-11-18T11:06:40Z", .expiresEpoch),
            ("https://a.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-11-27T10%3A00%3A00Z&sr=b&sp=r&sig=ef56",
             "2026-11-27T10:00:00Z", .azureSAS),
            ("https://a.blob.core.windows.net/c/b?sp=r&se=2026-11-27T10:00Z&sig=ef56", "2026-11-27T10:00:00Z", .azureSAS),
            ("https://a.blob.core.windows.net/c/b?se=2026-11-27&sig=ef56", "2026-11-27T00:00:00Z", .azureSAS),
            ("https://h/s/f.iso?md5=XgQj1vMr0W2bQ_f-C3zRhQ&expires=1795000000", "2026-11-18T11:06:40Z", .nginxSecureLink),
            ("https://h/k?x-amz-date=20261126T210000Z&x-amz-expires=60", "2026-11-26T21:01:00Z", .s3SigV4),
        ]
        for (url, expected, form) in rows {
            let expiry = URLExpiry.read(from: url)
            XCTAssertEqual(expiry?.date, at(expected), url)
            XCTAssertEqual(expiry?.form, form, url)
        }
    }

    func testSeveralFormsExpireAtTheEarliest() {
        let url = "https://h/k?Expires=1795000000&Signature=s&X-Amz-Date=20261126T210000Z&X-Amz-Expires=10"
        XCTAssertEqual(URLExpiry.read(from: url), URLExpiry(date: at("2026-11-18T11:06:40Z"), form: .expiresEpoch))
    }

    func testURLsWithoutAFormOrWithMalformedValuesHaveNoExpiry() {
        for url in [
            "https://h/k",
            "https://h/k?Expires=1795000000",                        // no signature: not a signed URL
            "https://h/k?se=2026-11-27T10:00:00Z",                   // no sig
            "https://h/k?X-Amz-Date=2026-11-26&X-Amz-Expires=60",     // not the compact form
            "https://h/k?X-Amz-Date=20261126T210000Z",                // no X-Amz-Expires
            "https://h/k?X-Amz-Date=20261126T210000Z&X-Amz-Expires=soon",
            "https://h/k?Expires=tomorrow&Signature=s",
            "https://h/k?se=yesterday&sig=s",
            "https://h/k?X-Amz-Date=20261332T250000Z&X-Amz-Expires=60",
        ] {
            XCTAssertNil(URLExpiry.read(from: url), url)
        }
    }

    func testTheExpiresKeyWinsOverTheURLAndIsADefault() throws {
        let text = """
            expires: 2026-11-27T01:00:00+01:00
            url: https://h/a?X-Amz-Date=20261126T210000Z&X-Amz-Expires=60
            url: https://h/b
            expires: 2026-11-28T00:00:00Z
            """
        let file = try RequestParser.parse(fileName: "r", bytes: Array(text.utf8))
        XCTAssertEqual(file.items[0].expiry, URLExpiry(date: at("2026-11-27T00:00:00Z"), form: .expiresKey))
        XCTAssertEqual(file.items[1].expiry, URLExpiry(date: at("2026-11-28T00:00:00Z"), form: .expiresKey))
        let plain = try RequestParser.parse(fileName: "r", bytes: Array("https://h/a?X-Amz-Date=20261126T210000Z&X-Amz-Expires=60\n".utf8))
        XCTAssertEqual(plain.items[0].expiry, URLExpiry(date: at("2026-11-26T21:01:00Z"), form: .s3SigV4))
        XCTAssertThrowsError(try RequestParser.parse(fileName: "r", bytes: Array("url: https://h/a\nexpires: soon\n".utf8))) {
            XCTAssertEqual(($0 as? RequestRejection)?.rule, "bad-time")
            XCTAssertEqual(($0 as? RequestRejection)?.line, 2)
        }
    }

    func testCredentialsAndRefreshKeyAreDefaultsOrPerItemAndChecked() throws {
        let text = "credentials: api\nrefresh-key: bucket/a\nurl: https://h/a\nurl: https://h/b\ncredentials: other\nrefresh-key: bucket/b\n"
        let file = try RequestParser.parse(fileName: "r", bytes: Array(text.utf8))
        XCTAssertEqual(file.items.map(\.credentials), ["api", "other"])
        XCTAssertEqual(file.items.map(\.refreshKey), ["bucket/a", "bucket/b"])
        for (bad, rule) in [("credentials: ../etc/shadow", "bad-credentials"), ("credentials: .hidden", "bad-credentials"),
                            ("refresh-key: a\u{1}b", "bad-refresh-key")] {
            XCTAssertThrowsError(try RequestParser.parse(fileName: "r", bytes: Array("url: https://h/a\n\(bad)\n".utf8)), bad) {
                XCTAssertEqual(($0 as? RequestRejection)?.rule, rule, bad)
            }
        }
    }

    func testTheIndexNotesItemsThatStartAfterTheirURLExpires() throws {
        let text = """
            earliest-start: 2026-11-27T02:00:00Z
            url: https://h/late?X-Amz-Date=20261126T210000Z&X-Amz-Expires=3600
            url: https://h/fine?X-Amz-Date=20261126T210000Z&X-Amz-Expires=604800
            url: https://h/also-late
            expires: 2026-11-27T01:00:00Z
            url: https://h/unsigned
            """
        let index = try RequestParser.index(fileName: "r", bytes: Array(text.utf8))
        XCTAssertEqual(index.expiryNotes.lateStarts, 2)
        XCTAssertEqual(index.expiryNotes.firstLateStart?.index, 0)
        XCTAssertEqual(index.expiryNotes.firstLateStart?.expiry.date, at("2026-11-26T22:00:00Z"))
        XCTAssertNil(index.expiryNotes.firstDiscretionary)
        let now = try RequestParser.index(fileName: "r", bytes: Array("https://h/a?X-Amz-Date=20261126T210000Z&X-Amz-Expires=1\n".utf8))
        XCTAssertTrue(now.expiryNotes.isEmpty, "an item that starts at once is checked at its turn, not at intake")
    }
}
