import Foundation
import SpoolRequest
import XCTest

/// Bounded inputs: a `header:` is at most 8 KiB (`Name: value`) and an item's headers, the file's
/// defaults included, at most 64 KiB together; beyond that the file is refused at the line, by
/// every way of reading it (whole, streamed into an index), before any item is handed out.
final class HeaderLimitTests: XCTestCase {
    /// `header: NAME: vvv…` whose `Name: value` is exactly `bytes` long.
    private func header(_ name: String, bytes: Int) -> String {
        "header: \(name): " + String(repeating: "v", count: bytes - name.utf8.count - 2)
    }

    /// The rejection of `text`, the same from `parse` and from the streamed `index`.
    private func rejection(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> RequestRejection? {
        var fromParse: RequestRejection?
        do { _ = try RequestParser.parse(fileName: "req", bytes: Array(text.utf8)) } catch { fromParse = error }
        var fromIndex: RequestRejection?
        do { _ = try RequestParser.index(fileName: "req", bytes: Array(text.utf8)) } catch { fromIndex = error }
        XCTAssertEqual(fromParse, fromIndex, "parse and index refuse the same file the same way", file: file, line: line)
        XCTAssertNotNil(fromParse, "expected a rejection", file: file, line: line)
        return fromParse
    }

    func testAHeaderOf8KiBIsTakenAndOneByteMoreIsRefusedAtItsLine() throws {
        let ok = try RequestParser.parse(fileName: "req", bytes: Array("http://h.example/a\n\(header("X-A", bytes: 8192))\n".utf8))
        XCTAssertEqual(ok.items[0].headers.first.map { $0.line.utf8.count }, 8192)
        let r = rejection("# one\nhttp://h.example/a\n\(header("X-A", bytes: 8193))\n")
        XCTAssertEqual(r?.rule, "header-too-large")
        XCTAssertEqual(r?.line, 3)
        XCTAssertEqual(r?.file, "req")
        XCTAssertTrue(r?.description.contains("8192") ?? false, r?.description ?? "")
        XCTAssertFalse(r?.description.contains("vvvv") ?? true, "the value is never quoted")
    }

    func testATenMegabyteHeaderIsRefusedAtItsLineWhenStreamedFromAFile() throws {
        let path = NSTemporaryDirectory() + "header-limit-\(getpid())"
        let text = "http://h.example/a\nname: a.bin\nheader: X-Big: " + String(repeating: "x", count: 10 << 20) + "\n"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        XCTAssertThrowsError(try RequestParser.index(fileName: "big", descriptor: fd)) { error in
            guard case RequestReadError.rejected(let r) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(r.rule, "header-too-large")
            XCTAssertEqual(r.line, 3)
        }
    }

    func testAnItemsHeadersAre64KiBAtMostWithTheDefaultsAndTheLineThatGoesPastIsNamed() throws {
        // Four default headers and four of the item's own: 8 × 8 KiB = 64 KiB exactly, taken.
        let defaults = (0..<4).map { header("X-D\($0)", bytes: 8192) }.joined(separator: "\n")
        let own = (0..<4).map { header("X-I\($0)", bytes: 8192) }.joined(separator: "\n")
        let file = try RequestParser.parse(fileName: "req", bytes: Array("\(defaults)\nhttp://h.example/a\n\(own)\n".utf8))
        XCTAssertEqual(file.items[0].headers.count, 8)
        // A fifth header of the item's own (line 4 + 1 + 4 + 1 = 10) goes past it.
        let r = rejection("\(defaults)\nhttp://h.example/a\n\(own)\n\(header("X-I4", bytes: 7))\n")
        XCTAssertEqual(r?.rule, "headers-too-large")
        XCTAssertEqual(r?.line, 10)
        XCTAssertTrue(r?.description.contains("65536") ?? false, r?.description ?? "")
    }

    func testTheDefaultsAloneAreBoundedAndAReplacedDefaultCountsOnce() throws {
        let nine = (0..<9).map { header("X-D\($0)", bytes: 8000) }.joined(separator: "\n")
        let r = rejection("\(nine)\nhttp://h.example/a\n")
        XCTAssertEqual(r?.rule, "headers-too-large")
        XCTAssertEqual(r?.line, 9, "the ninth default header goes past 64 KiB")
        // Eight defaults of 8 KiB, each replaced by the item's own header of the same name: 64 KiB, not 128.
        let defaults = (0..<8).map { header("X-H\($0)", bytes: 8192) }.joined(separator: "\n")
        let own = (0..<8).map { header("x-h\($0)", bytes: 8192) }.joined(separator: "\n")
        let file = try RequestParser.parse(fileName: "req", bytes: Array("\(defaults)\nhttp://h.example/a\n\(own)\nhttp://h.example/b\n".utf8))
        XCTAssertEqual(file.items.map { $0.headers.count }, [8, 8])
    }

    func testAHeaderPastTheLimitIsRefusedWhereverHeadersAreParsed() {
        guard case .failure(let r) = RequestHeader.parse("X-A: " + String(repeating: "v", count: 8188)) else {
            return XCTFail("an 8193-byte header was taken")
        }
        XCTAssertEqual(r.rule, "header-too-large")
    }
}
