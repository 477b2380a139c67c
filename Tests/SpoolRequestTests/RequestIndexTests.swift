import Foundation
import SpoolRequest
import XCTest

/// The streaming index and the in-memory parse are two readings of one grammar: they must
/// accept the same files, reject the same files at the same lines, and an item re-read from its
/// slice must equal the item of the whole parse.
final class RequestIndexTests: XCTestCase {
    static let digest = String(repeating: "Ab", count: 32)

    /// Every key, defaults, CRLF, comments, a BOM, IPv6, repeated hosts, trailing text without LF.
    static let corpus: [String] = [
        "http://a.example/x.csv\nhttps://b.example:8443/dir/y.json\n\nhttp://c.example/\n",
        """
        # defaults
        group: nightly
        markers: group
        on-exists: skip-unchanged
        priority: low
        header: X-A: 1
        header: X-B: 2
        earliest-start: 2026-11-23T02:00:00+01:00
        expected-bytes: 2G
        discretionary: yes
        max-bytes: 3G
        sha256: \(digest)
        name: same-for-all.bin

        http://h/a
        url: http://h/b
        priority: high
        header: x-b: 3
        name: b.bin
        on-exists: replace
        earliest-start: 2026-11-23T03:00:00.250Z
        expected-bytes: 10k
        max-bytes: 20k
        discretionary: no
        # a comment inside an item

        URL: HTTPS://[::1]:8080/v6?q=1#frag
        sha256: \(digest.lowercased())
        """,
        "\u{FEFF}# hello\r\n\r\n   # indented comment\r\nhttp://h/a\r\nname: a.txt\r\n\thttp://h/b  \r\npriority: low",
        "http://h/%E2%82%AC.txt\nhttp://h/dir/\nhttp://h\nhttp://h/.bashrc\nhttp://h/f.done",
        "priority: high\nhttp://one.example/a",
    ]

    func testIndexAndParseAgreeAndSlicesReparseToTheSameItems() throws {
        for text in Self.corpus {
            let bytes = Array(text.utf8)
            let file = try RequestParser.parse(fileName: "req", bytes: bytes)
            let index = try RequestParser.index(fileName: "req", bytes: bytes)
            XCTAssertEqual(index.group, file.group)
            XCTAssertEqual(index.markers, file.markers)
            XCTAssertEqual(index.onExists, file.onExists)
            XCTAssertEqual(index.fileSize, Int64(bytes.count))
            XCTAssertEqual(index.items.count, file.items.count, text.debugDescription)
            for (summary, item) in zip(index.items, file.items) {
                XCTAssertEqual(Int(summary.index), item.index)
                XCTAssertEqual(Int(summary.line), item.line)
                XCTAssertEqual(index.hostKey(of: summary), item.url.hostKey)
                XCTAssertEqual(summary.earliestStart, item.earliestStart)
                XCTAssertEqual(summary.expectedBytes, item.expectedBytes)
                XCTAssertEqual(summary.priority, item.priority)
                XCTAssertEqual(summary.discretionary, item.discretionary)
                let slice = bytes[Int(summary.offset)..<Int(summary.offset) + Int(summary.length)]
                XCTAssertEqual(try RequestParser.item(summary, in: index, bytes: slice), item, text.debugDescription)
            }
            // The slices tile the file from the first item on.
            for (a, b) in zip(index.items, index.items.dropFirst()) {
                XCTAssertEqual(a.offset + Int64(a.length), b.offset)
            }
            if let last = index.items.last { XCTAssertEqual(last.offset + Int64(last.length), index.fileSize) }
        }
        let hosts = try RequestParser.index(fileName: "r", bytes: Array(Self.corpus[0].utf8)).hosts
        XCTAssertEqual(hosts, ["a.example:80", "b.example:8443", "c.example:80"])
    }

    func testRejectionsAreTheSameForIndexAndParse() {
        let cases = [
            "http://h/a\nprioirty: high", "http://h/a\nname: a\nname: b", "http://h/a\ngroup: g",
            "group: a/b\nhttp://h/a", "just some words", "ftp://h/a", "url: http://user:pw@h/a",
            "http://h/a\nearliest-start: tomorrow", "http://h/a\nsha256: abc", "http://h/a\npriority: urgent",
            "http://h/a\nheader: Range: bytes=0-", "http://h/a\nname: ../x", "# only a comment\n", "",
            "http://h/a\n\n\nhttp://h/b\nexpected-bytes: -1\r\n", "priority: low\npriority: high\nhttp://h/",
            "markers: grup\nhttp://h/", "http://h/\nmarkers: group", "on-exists: replce\nhttp://h/",
        ]
        for text in cases {
            var fromParse: RequestRejection?
            var fromIndex: RequestRejection?
            do { _ = try RequestParser.parse(fileName: "req", bytes: Array(text.utf8)) } catch { fromParse = error }
            do { _ = try RequestParser.index(fileName: "req", bytes: Array(text.utf8)) } catch { fromIndex = error }
            XCTAssertNotNil(fromParse, text.debugDescription)
            XCTAssertEqual(fromParse, fromIndex, text.debugDescription)
        }
        let bytes: [UInt8] = Array("http://h/a\nname: ok\n".utf8) + [0x6E, 0x61, 0xFF, 0x0A]
        XCTAssertThrowsError(try RequestParser.index(fileName: "r", bytes: bytes)) { error in
            XCTAssertEqual((error as? RequestRejection)?.rule, "not-utf8")
            XCTAssertEqual((error as? RequestRejection)?.line, 3)
        }
        let many = (0..<11).map { "http://h/\($0)" }.joined(separator: "\n")
        XCTAssertThrowsError(try RequestParser.index(fileName: "r", bytes: Array(many.utf8), limits: ParseLimits(maxItems: 10))) { error in
            XCTAssertEqual((error as? RequestRejection)?.rule, "too-many-items")
            XCTAssertEqual((error as? RequestRejection)?.line, 11)
        }
    }

    /// Lines cut anywhere by the chunking (here: reads of 1 to 7 bytes) read the same.
    func testChunkBoundariesDoNotMatter() throws {
        for text in Self.corpus {
            var source = TricklingSource(bytes: Array(text.utf8))
            let trickled = try RequestParser.index(fileName: "req", source: &source)
            let whole = try RequestParser.index(fileName: "req", bytes: Array(text.utf8))
            XCTAssertEqual(trickled.items, whole.items)
            XCTAssertEqual(trickled.hosts, whole.hosts)
        }
    }

    func testIndexAndReparseFromAFileDescriptor() throws {
        // Long URLs so the lines straddle the reader's 256 KiB chunks.
        var text = "group: big\nheader: Accept: */*\n"
        for i in 0..<3000 { text += "url: https://h\(i % 5).example/\(String(repeating: "p", count: 200))/\(i)\nname: n\(i)\n" }
        let (path, fd) = try temporaryFile(text)
        defer { close(fd); unlink(path) }
        let file = try RequestParser.parse(fileName: "big", bytes: Array(text.utf8))
        let index = try RequestParser.index(fileName: "big", descriptor: fd)
        XCTAssertEqual(index.items.count, 3000)
        XCTAssertEqual(index.hosts.count, 5)
        XCTAssertEqual(lseek(fd, 0, SEEK_CUR), 0, "the descriptor's offset is left alone")
        for summary in index.items {
            XCTAssertEqual(try RequestParser.item(summary, in: index, descriptor: fd), file.items[Int(summary.index)])
        }
        XCTAssertThrowsError(try RequestParser.index(fileName: "big", descriptor: fd, limits: ParseLimits(maxBytes: 1000))) { error in
            guard case .rejected(let r) = error as? RequestReadError else { return XCTFail("\(error)") }
            XCTAssertEqual(r.rule, "too-large")
        }
        XCTAssertThrowsError(try RequestParser.index(fileName: "bad", descriptor: -1)) { error in
            guard case .unreadable(_, let e) = error as? RequestReadError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.errno, EBADF)
        }
    }

    func testASliceThatChangedIsRefused() throws {
        let text = "http://h/a\nname: a\nhttp://h/b\nname: b\n"
        let index = try RequestParser.index(fileName: "r", bytes: Array(text.utf8))
        let second = index.items[1]
        for changed in ["http://h/c\nname: b\n", "http://other/b\nname: b\n", "name: b\nhttp://h/b\n",
                        "http://h/b\nhttp://h/b\n", "http://h/b\npriority: low"] {
            XCTAssertThrowsError(try RequestParser.item(second, in: index, bytes: Array(changed.utf8)), changed) { error in
                XCTAssertEqual((error as? RequestRejection)?.rule, "changed-on-disk", changed)
            }
        }
    }

    func testSummaryIsCompact() {
        XCTAssertLessThanOrEqual(MemoryLayout<ItemSummary>.stride, 64)
    }

    /// 100,000 URLs: validated whole and indexed from the file. The time is printed, not asserted
    /// (debug builds and a shared machine vary); the memory per item is asserted.
    func testHundredThousandURLList() throws {
        var text = ""
        text.reserveCapacity(9_000_000)
        for i in 0..<100_000 { text += "https://host\(i % 7).example.org:8443/data/batch-2026-11-22/file-\(i).csv.gz?sig=abcdef\(i)\n" }
        let (path, fd) = try temporaryFile(text)
        defer { close(fd); unlink(path) }
        let started = Date()
        let cpuStarted = clock()
        let index = try RequestParser.index(fileName: "list", descriptor: fd)
        let seconds = Date().timeIntervalSince(started)
        let cpuSeconds = Double(clock() - cpuStarted) / Double(CLOCKS_PER_SEC)
        XCTAssertEqual(index.items.count, 100_000)
        XCTAssertEqual(index.hosts.count, 7)
        let perItem = Double(index.approximateHeapBytes) / 100_000
        print("100,000-URL list (\(text.utf8.count) bytes): indexed in \(String(format: "%.3f", seconds)) s "
              + "(\(String(format: "%.3f", cpuSeconds)) s CPU; this build's optimisation applies); "
              + "ItemSummary stride \(MemoryLayout<ItemSummary>.stride) B, index heap \(index.approximateHeapBytes) B "
              + "(\(String(format: "%.1f", perItem)) B per item)")
        XCTAssertLessThanOrEqual(perItem, 64)
        let last = try RequestParser.item(index.items[99_999], in: index, descriptor: fd)
        XCTAssertEqual(last.name, "file-99999.csv.gz")
        XCTAssertEqual(last.line, 100_000)
    }

    private func temporaryFile(_ text: String) throws -> (String, Int32) {
        let path = NSTemporaryDirectory() + "/spoolfetch-index-\(getpid())-\(UUID().uuidString)"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno)!) }
        return (path, fd)
    }
}

/// Hands out 1 to 7 bytes per read, so every line is cut somewhere.
private struct TricklingSource: RequestByteSource {
    let bytes: [UInt8]
    var position = 0
    var step = 0

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(RequestSourceError) -> Int {
        step = step % 7 + 1
        let n = min(step, buffer.count, bytes.count - position)
        guard n > 0 else { return 0 }
        for i in 0..<n { buffer[i] = bytes[position + i] }
        position += n
        return n
    }
}
