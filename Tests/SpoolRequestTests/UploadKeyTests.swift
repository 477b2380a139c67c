import Foundation
import SpoolRequest
import XCTest

/// `upload`, `method` and `content-type`: what a request file may say about sending a file.
final class UploadKeyTests: XCTestCase {
    private func parse(_ text: String) throws -> RequestFile {
        try RequestParser.parse(fileName: "req", bytes: Array(text.utf8))
    }

    private func rejection(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> RequestRejection? {
        do {
            _ = try parse(text)
            XCTFail("expected a rejection", file: file, line: line)
            return nil
        } catch {
            return error as? RequestRejection
        }
    }

    func testUploadItemsWithDefaultsAndOwnValues() throws {
        let file = try parse("""
            method: post
            content-type: text/csv; charset=utf-8
            url: https://h.example/in
            upload: a.csv
            url: https://h.example/put/b.bin
            upload: b.bin
            method: PUT
            content-type: application/octet-stream
            https://h.example/download.txt
            """)
        XCTAssertEqual(file.items.map(\.upload), [
            Upload(name: "a.csv", method: .post, contentType: "text/csv; charset=utf-8"),
            Upload(name: "b.bin", method: .put, contentType: "application/octet-stream"),
            nil,
        ])
        XCTAssertEqual(try parse("url: https://h.example/x\nupload: x\n").items[0].upload,
                       Upload(name: "x", method: .put, contentType: "application/octet-stream"), "PUT and octet-stream by default")
    }

    func testIndexMarksUploadItemsAndListsTheirFiles() throws {
        let text = "https://h.example/d\nurl: https://h.example/u\nupload: u.bin\n"
        let index = try RequestParser.index(fileName: "req", bytes: Array(text.utf8))
        XCTAssertEqual(index.items.map(\.isUpload), [false, true])
        XCTAssertEqual(index.uploads, [UploadEntry(index: 1, line: 2, name: "u.bin")])
        XCTAssertEqual(MemoryLayout<ItemSummary>.stride, 48, "a waiting item stays 48 bytes")
    }

    func testEachWayOutOfOutgoingHasItsReason() {
        for (value, says) in [("/etc/shadow", "absolute path"), ("../x", "'..'"), ("a/../../x", "'..'"), ("..", "'..'"),
                              ("sub/x", "'/'"), (".hidden", "starts with '.'"), ("x.done", ".done"),
                              ("x.uploaded", ".uploaded"), ("x.response", ".response"), ("a\u{1}b", "control")] {
            let r = rejection("url: https://h.example/u\nupload: \(value)\n")
            XCTAssertEqual(r?.rule, "bad-upload", value)
            XCTAssertEqual(r?.line, 2, value)
            XCTAssertTrue(r?.message.contains(says) ?? false, "\(value): \(r?.message ?? "")")
        }
    }

    func testRulesAndLines() {
        let u = "url: https://h.example/u\n"
        let cases: [(String, String, Int)] = [
            ("upload: a\n" + u, "item-level-key", 1),
            (u + "upload: a\nupload: b\n", "duplicate-key", 3),
            (u + "upload: a\nname: b\n", "upload-conflict", 3),
            (u + "max-bytes: 1k\nupload: a\n", "upload-conflict", 3),
            (u + "upload: a\nexpected-bytes: 1k\n", "upload-conflict", 3),
            (u + "upload: a\non-exists: replace\n", "upload-conflict", 3),
            (u + "upload: a\nmirror: https://m.example/u\n", "upload-conflict", 3),
            (u + "content-type: text/plain\n", "upload-only-key", 2),
            (u + "upload: a\nmethod: GET\n", "bad-method", 3),
            (u + "upload: a\ncontent-type: text\n", "bad-content-type", 3),
            (u + "upload: a\ncontent-type: text/plain\u{7F}\n", "bad-content-type", 3),
            (u + "upload: a\n" + u + "upload: a\n", "duplicate-upload", 3),
            (u + "uplaod: a\n", "unknown-key", 2),
        ]
        for (text, rule, line) in cases {
            let r = rejection(text)
            XCTAssertEqual(r?.rule, rule, text)
            XCTAssertEqual(r?.line, line, text)
        }
        XCTAssertTrue(rejection(u + "uplaod: a\n")?.message.contains("did you mean 'upload'") ?? false)
        XCTAssertTrue(rejection(u + "upload: a\nmethod: PTU\n")?.message.contains("did you mean 'put'") ?? false)
    }

    func testAMethodDefaultLeavesDownloadsAlone() throws {
        let file = try parse("method: POST\nhttps://h.example/a\nurl: https://h.example/b\nupload: b\n")
        XCTAssertNil(file.items[0].upload)
        XCTAssertEqual(file.items[1].upload?.method, .post)
    }
}
