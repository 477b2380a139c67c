import Foundation
import SpoolRequest
import XCTest

/// `RequestItemReader` serves the same items as one `pread` per item, in any order, with few
/// reads when the items come in file order, and still refuses a file that changed.
final class RequestItemReaderTests: XCTestCase {
    private var paths: [String] = []

    override func tearDown() {
        for path in paths { unlink(path) }
        super.tearDown()
    }

    /// A list with defaults and per-item keys, some items a few lines long.
    private func listText(count: Int, pathLength: Int = 20) -> String {
        var text = "group: big\nheader: Accept: */*\n"
        for i in 0..<count {
            text += "url: https://h\(i % 5).example/\(String(repeating: "p", count: pathLength))/\(i)\n"
            if i % 3 == 0 { text += "name: n\(i)\npriority: high\n" }
        }
        return text
    }

    func testItemsInFileOrderEqualTheWholeParseWithAFewReads() throws {
        let text = listText(count: 3000, pathLength: 60)
        let (reader, fd) = try readAllInFileOrder(text)
        defer { close(fd) }
        // 4 KiB doubling to 256 KiB: 4+8+…+256 = 508 KiB in 7 reads, then 256 KiB each. Each
        // refill starts at the item that did not fit, so a window covers a little less: one read
        // of slack.
        let bytes = text.utf8.count
        let expected = 7 + max(0, (bytes - 508 * 1024 + 256 * 1024 - 1) / (256 * 1024))
        print("RequestItemReader: 3,000 items (\(bytes) bytes) in \(reader.reads) reads")
        XCTAssertLessThanOrEqual(reader.reads, expected + 1)
        XCTAssertEqual(lseek(fd, 0, SEEK_CUR), 0, "the descriptor's offset is left alone")
    }

    func testItemsOutOfOrderEqualOnePreadEach() throws {
        let text = listText(count: 500)
        let (index, fd) = try indexed(text)
        defer { close(fd) }
        let reader = RequestItemReader(fd: fd)
        var generator = SplitMix(seed: 7)
        let orders: [[ItemSummary]] = [index.items.reversed(), index.items.shuffled(using: &generator)]
        for order in orders {
            for summary in order {
                XCTAssertEqual(try read(summary, of: index, with: reader), try RequestParser.item(summary, in: index, descriptor: fd))
            }
        }
    }

    /// An item longer than the largest window is read whole, in a window of its own size.
    func testAnItemLongerThanTheLargestWindow() throws {
        // A header is at most 8 KiB and an item's headers 64 KiB together, but a header given
        // again replaces the one before: 40 lines of 8,000 bytes make a long item of one header.
        let line = "header: X-Long: " + String(repeating: "q", count: 8000) + "\n"
        let long = String(repeating: line, count: RequestItemReader.maximumRead / 8000 + 8)
        let text = "https://a.example/first\nurl: https://a.example/second\n\(long)https://a.example/third\n"
        let (reader, fd) = try readAllInFileOrder(text)
        close(fd)
        // The first item's 4 KiB; the long item's own window, in one read; the last item's, a
        // short read at the end of the file and the 0 that says so.
        XCTAssertEqual(reader.reads, 4)
    }

    /// A file cut short under its claim: the item the cut goes through is refused as a fresh
    /// read refuses it, those past the cut are `changed-on-disk`, and those before it still read.
    func testAFileCutShortIsRefusedPastTheCut() throws {
        let text = listText(count: 200)
        let (index, fd) = try indexed(text)
        defer { close(fd) }
        XCTAssertEqual(ftruncate(fd, off_t(index.items[150].offset + 3)), 0)
        let reader = RequestItemReader(fd: fd)
        XCTAssertEqual(try read(index.items[0], of: index, with: reader).url.string,
                       "https://h0.example/\(String(repeating: "p", count: 20))/0")
        func rule(_ read: () throws -> RequestItem) -> String? {
            do { _ = try read(); return nil } catch {
                guard case .rejected(let r) = error as? RequestReadError else { return "\(error)" }
                return r.rule
            }
        }
        for summary in index.items[150...] {
            let windowed = rule { try read(summary, of: index, with: reader) }
            let fresh = rule { try RequestParser.item(summary, in: index, descriptor: fd) }
            XCTAssertNotNil(windowed)
            XCTAssertEqual(windowed, fresh)
            if summary.index > 150 { XCTAssertEqual(windowed, "changed-on-disk") }
        }
    }

    func testAReadErrorNamesTheCallAndErrno() throws {
        let (index, fd) = try indexed(listText(count: 3))
        close(fd)
        let reader = RequestItemReader(fd: -1)
        XCTAssertThrowsError(try read(index.items[0], of: index, with: reader)) { error in
            guard case .unreadable(let file, let e) = error as? RequestReadError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "big")
            XCTAssertEqual(e.call, "pread")
            XCTAssertEqual(e.errno, EBADF)
        }
    }

    /// Reads every item of `text` in file order through one reader, each checked against the
    /// whole parse; returns the reader (for its read count) and the still-open file.
    private func readAllInFileOrder(_ text: String) throws -> (RequestItemReader, Int32) {
        let (index, fd) = try indexed(text)
        let file = try RequestParser.parse(fileName: "big", bytes: Array(text.utf8))
        let reader = RequestItemReader(fd: fd)
        for summary in index.items {
            XCTAssertEqual(try read(summary, of: index, with: reader), file.items[Int(summary.index)])
        }
        return (reader, fd)
    }

    private func read(_ summary: ItemSummary, of index: RequestIndex, with reader: RequestItemReader) throws -> RequestItem {
        try reader.item(summary, hostKey: index.hostKey(of: summary), settings: index.settings)
    }

    private func indexed(_ text: String) throws -> (RequestIndex, Int32) {
        let path = NSTemporaryDirectory() + "/spoolfetch-reader-\(getpid())-\(UUID().uuidString)"
        paths.append(path)
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno)!) }
        return (try RequestParser.index(fileName: "big", descriptor: fd), fd)
    }
}

/// A seeded generator, so a shuffled order is the same on every run.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
