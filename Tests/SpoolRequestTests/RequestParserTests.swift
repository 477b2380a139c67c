import Foundation
import SpoolRequest
import XCTest

final class RequestParserTests: XCTestCase {
    private func parse(_ text: String, limits: ParseLimits = ParseLimits()) throws -> RequestFile {
        try RequestParser.parse(fileName: "req", bytes: Array(text.utf8), limits: limits)
    }

    private func rejection(_ text: String, limits: ParseLimits = ParseLimits(),
                           file: StaticString = #filePath, line: UInt = #line) -> RequestRejection? {
        do {
            _ = try RequestParser.parse(fileName: "req", bytes: Array(text.utf8), limits: limits)
            XCTFail("expected a rejection", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func testPlainURLListGivesOneItemPerURL() throws {
        let file = try parse("http://a.example/x.csv\nhttps://b.example:8443/dir/y.json\n\nhttp://c.example/\n")
        XCTAssertEqual(file.items.count, 3)
        XCTAssertEqual(file.items.map(\.name), ["x.csv", "y.json", "download"])
        XCTAssertEqual(file.items.map(\.index), [0, 1, 2])
        XCTAssertEqual(file.items.map(\.line), [1, 2, 4])
        XCTAssertEqual(file.items[1].url.hostKey, "b.example:8443")
        XCTAssertEqual(file.items[0].url.hostKey, "a.example:80")
        XCTAssertEqual(file.group, "req")
    }

    func testSingleItemWithEveryOption() throws {
        let digest = String(repeating: "Ab", count: 32)
        let file = try parse("""
            URL: https://h.example/f
            name: out.bin
            earliest-start: 2026-11-23T02:00:00+01:00
            expected-bytes: 10M
            max-bytes: 1GiB
            sha256: \(digest)
            priority: HIGH
            discretionary: yes
            header: Accept: text/csv
            """)
        let item = try XCTUnwrap(file.items.first)
        XCTAssertEqual(item.name, "out.bin")
        XCTAssertEqual(item.earliestStart, Date(timeIntervalSince1970: 1_795_395_600))
        XCTAssertEqual(item.expectedBytes, 10 << 20)
        XCTAssertEqual(item.maxBytes, 1 << 30)
        XCTAssertEqual(item.sha256, digest.lowercased())
        XCTAssertEqual(item.priority, .high)
        XCTAssertTrue(item.discretionary)
        XCTAssertEqual(item.headers, [RequestHeader(name: "Accept", value: "text/csv")])
    }

    func testDefaultsApplyToEveryItemAndItemsOverride() throws {
        let file = try parse("""
            # defaults
            priority: low
            header: X-A: 1
            header: X-B: 2
            group: nightly
            http://h/a
            url: http://h/b
            priority: high
            header: x-b: 3
            """)
        XCTAssertEqual(file.group, "nightly")
        XCTAssertEqual(file.items[0].priority, .low)
        XCTAssertEqual(file.items[1].priority, .high)
        XCTAssertEqual(file.items[0].headers.map(\.line), ["X-A: 1", "X-B: 2"])
        XCTAssertEqual(file.items[1].headers.map(\.line), ["X-A: 1", "x-b: 3"])
    }

    func testMarkersAndOnExists() throws {
        let plain = try parse("http://h/a")
        XCTAssertEqual(plain.markers, .item)
        XCTAssertEqual(plain.onExists, .keepBoth)
        XCTAssertEqual(plain.items[0].onExists, .keepBoth)
        let file = try parse("""
            Markers: GROUP
            on-exists: skip-unchanged
            http://h/a
            http://h/b
            on-exists: Replace
            url: http://h/c
            on-exists: keep-both
            """)
        XCTAssertEqual(file.markers, .group)
        XCTAssertEqual(file.onExists, .skipUnchanged)
        XCTAssertEqual(file.items.map(\.onExists), [.skipUnchanged, .replace, .keepBoth])
        XCTAssertEqual(try parse("markers: item\nhttp://h/a").markers, .item)

        let cases: [(String, String, Int, String?)] = [
            ("markers: grup\nhttp://h/a", "bad-markers", 1, "did you mean 'group'?"),
            ("markers: everything\nhttp://h/a", "bad-markers", 1, nil),
            ("http://h/a\nmarkers: group", "file-level-key", 2, nil),
            ("markers: group\nmarkers: item\nhttp://h/a", "duplicate-key", 2, nil),
            ("# c\non-exists: replce\nhttp://h/a", "bad-on-exists", 2, "did you mean 'replace'?"),
            ("http://h/a\non-exists: skip_unchanged", "bad-on-exists", 2, "did you mean 'skip-unchanged'?"),
            ("http://h/a\non-exists: replace\non-exists: replace", "duplicate-key", 3, nil),
            ("http://h/a\nmarker: group", "unknown-key", 2, "did you mean 'markers'?"),
            ("http://h/a\nonexists: replace", "unknown-key", 2, "did you mean 'on-exists'?"),
            ("http://h/a\nprioirty: high", "unknown-key", 2, "did you mean 'priority'?"),
            ("http://h/a\nxyzzy: 1", "unknown-key", 2, nil),
        ]
        for (text, rule, line, hint) in cases {
            let r = rejection(text)
            XCTAssertEqual(r?.rule, rule, text.debugDescription)
            XCTAssertEqual(r?.line, line, text.debugDescription)
            if let hint {
                XCTAssertTrue(r?.message.contains(hint) == true, "\(r?.message ?? "nil") for \(text.debugDescription)")
            } else {
                XCTAssertFalse(r?.message.contains("did you mean") == true, "\(r?.message ?? "nil")")
            }
        }
    }

    func testMaxRateIsAFileLevelRate() throws {
        let index = try RequestParser.index(fileName: "req", bytes: Array("max-rate: 512k\nhttp://h/a\nhttp://h/b".utf8))
        XCTAssertEqual(index.settings.maxRate, 512 << 10)
        XCTAssertFalse(index.settings.isPlain, "a rate of its own is kept with the waiting request")
        XCTAssertNil(try RequestParser.index(fileName: "req", bytes: Array("http://h/a".utf8)).settings.maxRate)
        XCTAssertEqual(try parse("max-rate: 1M\nhttp://h/a").items.count, 1)
        let cases: [(String, String, Int)] = [
            ("http://h/a\nmax-rate: 1M", "file-level-key", 2),
            ("max-rate: 1M\nmax-rate: 2M\nhttp://h/a", "duplicate-key", 2),
            ("max-rate: fast\nhttp://h/a", "bad-number", 1),
            ("max-rate: 0\nhttp://h/a", "bad-number", 1),
        ]
        for (text, rule, line) in cases {
            let r = rejection(text)
            XCTAssertEqual(r?.rule, rule, text.debugDescription)
            XCTAssertEqual(r?.line, line, text.debugDescription)
        }
        XCTAssertTrue(rejection("max-rate: fast\nhttp://h/a")?.message.contains("max-rate must be a positive number of bytes per second") == true)
    }

    func testCommentsBlankLinesCRLFAndBOM() throws {
        let file = try parse("\u{FEFF}# hello\r\n\r\n   # indented comment\r\nhttp://h/a\r\nname: a.txt\r\n")
        XCTAssertEqual(file.items.map(\.name), ["a.txt"])
    }

    func testRuleAndLineOfEachRejection() {
        let cases: [(String, String, Int?)] = [
            ("http://h/a\nprioirty: high", "unknown-key", 2),
            ("http://h/a\nname: a\nname: b", "duplicate-key", 3),
            ("http://h/a\ngroup: g", "file-level-key", 2),
            ("group: a/b\nhttp://h/a", "bad-group", 1),
            ("just some words", "malformed-line", 1),
            ("ftp://h/a", "bad-scheme", 1),
            ("url: file:///etc/passwd", "bad-scheme", 1),
            ("url: gopher://h/", "bad-scheme", 1),
            ("url: javascript://alert", "bad-scheme", 1),
            ("url: data://x", "bad-scheme", 1),
            ("url: http://user:pw@h/a", "bad-url", 1),
            ("url: http:///nohost", "bad-url", 1),
            ("url: http://h:0/", "bad-url", 1),
            ("url: http://h:65536/", "bad-url", 1),
            ("url: http://h/caf\u{E9}", "bad-url", 1),
            ("url: notaurl", "bad-url", 1),
            ("http://h/a\nearliest-start: tomorrow", "bad-time", 2),
            ("http://h/a\nexpected-bytes: -5", "bad-number", 2),
            ("http://h/a\nmax-bytes: 99999999999999999999", "bad-number", 2),
            ("http://h/a\nsha256: abc", "bad-sha256", 2),
            ("http://h/a\npriority: urgent", "bad-priority", 2),
            ("http://h/a\ndiscretionary: maybe", "bad-boolean", 2),
            ("http://h/a\nheader: NoColon", "bad-header", 2),
            ("http://h/a\nheader: Bad Name: x", "bad-header", 2),
            ("http://h/a\nheader: Range: bytes=0-", "bad-header", 2),
            ("http://h/a\nname: ../x", "bad-name", 2),
            ("http://h/a\nname: .hidden", "bad-name", 2),
            ("http://h/a\nname: a/b", "bad-name", 2),
            ("http://h/a\nname: ..", "bad-name", 2),
            ("http://h/a\nname: x.done", "bad-name", 2),
            ("http://h/a\nname: " + String(repeating: "n", count: 256), "bad-name", 2),
            ("# only a comment\n", "no-items", nil),
            ("", "no-items", nil),
        ]
        for (text, rule, line) in cases {
            let r = rejection(text)
            XCTAssertEqual(r?.rule, rule, "for \(text.debugDescription)")
            XCTAssertEqual(r?.line, line, "for \(text.debugDescription)")
            XCTAssertEqual(r?.file, "req")
        }
    }

    func testControlCharactersInNameAreRejected() {
        XCTAssertEqual(rejection("http://h/a\nname: a\u{01}b")?.rule, "bad-name")
        XCTAssertEqual(rejection("http://h/a\nname: a\u{7F}")?.rule, "bad-name")
    }

    func testNULAndHeaderLineBreaksCannotSmuggleAnything() {
        XCTAssertEqual(rejection("http://h/a\nheader: X: a\u{00}b")?.rule, "bad-header")
        // A bare CR inside a line (a LF would start a new line, itself checked).
        XCTAssertEqual(rejection("http://h/a\nheader: X: a\rInjected: b")?.rule, "bad-header")
    }

    func testRejectionMessagesNeverContainHeaderValues() {
        for text in ["header: Authorization: Bearer SECRET-TOKEN\nheader: Bad Name: SECRET-TOKEN\nhttp://h/",
                     "header: Cookie: SECRET-TOKEN\u{00}\nhttp://h/",
                     "http://h/\nheader: Range: SECRET-TOKEN",
                     "http://h/\nSECRET-TOKEN: x"] {
            let r = rejection(text)
            XCTAssertNotNil(r)
            XCTAssertFalse(r!.description.contains("SECRET-TOKEN"), r!.description)
        }
    }

    func testNotUTF8NamesTheLine() {
        let bytes: [UInt8] = Array("http://h/a\nname: ok\n".utf8) + [0x6E, 0x61, 0xFF, 0x0A]
        XCTAssertThrowsError(try RequestParser.parse(fileName: "r", bytes: bytes)) { error in
            let r = error as? RequestRejection
            XCTAssertEqual(r?.rule, "not-utf8")
            XCTAssertEqual(r?.line, 3)
        }
    }

    func testLimitsOnSizeAndItems() {
        XCTAssertEqual(ParseLimits().maxBytes, 64 << 20)
        XCTAssertEqual(ParseLimits().maxItems, 1_000_000)
        let big = String(repeating: "# padding\n", count: 7000) + "http://h/a\n"
        XCTAssertEqual(rejection(big, limits: ParseLimits(maxBytes: 65_536))?.rule, "too-large")
        XCTAssertNoThrow(try parse(big))
        let many = (0..<11).map { "http://h/\($0)" }.joined(separator: "\n")
        XCTAssertEqual(rejection(many, limits: ParseLimits(maxItems: 10))?.rule, "too-many-items")
        XCTAssertNoThrow(try parse(many, limits: ParseLimits(maxItems: 11)))
    }

    func testURLShapes() throws {
        let v6 = try RequestURL(validating: "http://[::1]:8080/x?q=1#frag")
        XCTAssertEqual(v6.host, "::1")
        XCTAssertEqual(v6.port, 8080)
        XCTAssertEqual(v6.path, "/x")
        XCTAssertEqual(v6.hostKey, "[::1]:8080")
        let upper = try RequestURL(validating: "HTTPS://Example.ORG/Path")
        XCTAssertEqual(upper.string, "https://example.org/Path")
        XCTAssertEqual(upper.port, 443)
        XCTAssertThrowsError(try RequestURL(validating: "http://h/a b"))
        XCTAssertThrowsError(try RequestURL(validating: "http://h/" + String(repeating: "a", count: 9000)))
    }

    func testDerivedNamesAreSanitised() throws {
        func name(_ url: String) throws -> String { PlainName.derived(from: try RequestURL(validating: url)) }
        XCTAssertEqual(try name("http://h/dir/report%20final.csv?x=1"), "report final.csv")
        XCTAssertEqual(try name("http://h/dir/"), "dir")
        XCTAssertEqual(try name("http://h//a//b//?c/d"), "b")
        XCTAssertEqual(try name("http://h///"), "download")
        XCTAssertEqual(try name("http://h/x"), "x")
        XCTAssertEqual(try name("http://h"), "download")
        XCTAssertEqual(try name("http://h/a/.."), "download")
        XCTAssertEqual(try name("http://h/%2e%2e"), "download")
        XCTAssertEqual(try name("http://h/.bashrc"), "bashrc")
        XCTAssertEqual(try name("http://h/a%2Fb"), "a_b")
        XCTAssertEqual(try name("http://h/x%00y"), "x_y")
        XCTAssertEqual(try name("http://h/f.done"), "f.done_")
        XCTAssertEqual(try name("http://h/%FF"), "%FF")
        // Plain ASCII names take a shorter way; the rule is the same.
        XCTAssertEqual(try name("http://h/dir/a~b-c_d.tar.gz?x=%2F"), "a~b-c_d.tar.gz")
        XCTAssertEqual(try name("http://h/File.PART"), "File.PART_")
        XCTAssertEqual(try name("http://h/x.Done"), "x.Done_")
        XCTAssertEqual(try name("http://h/a%20b.TMP"), "a b.TMP_")
        XCTAssertEqual(PlainName.sanitise("plain name.csv"), "plain name.csv")
        XCTAssertEqual(PlainName.sanitise("F.ERROR"), "F.ERROR_")
        XCTAssertEqual(PlainName.sanitise("a\\b"), "a_b")
        XCTAssertEqual(PlainName.sanitise("tab\there"), "tab_here")
        XCTAssertEqual(PlainName.sanitise(String(repeating: "x", count: 300)).utf8.count, 255)
        let long = try name("http://h/" + String(repeating: "%C3%A9", count: 200))
        XCTAssertLessThanOrEqual(long.utf8.count, 255)
        XCTAssertNil(PlainName.violation(of: long))
    }

    func testSanitisedNamesAlwaysSatisfyTheRule() {
        for candidate in ["", ".", "..", "...x", "/", "a\u{0}b", String(repeating: "é", count: 300), "x.tmp", ".part"] {
            XCTAssertNil(PlainName.violation(of: PlainName.sanitise(candidate)), candidate.debugDescription)
        }
    }

    func testRFC3339() {
        XCTAssertEqual(RFC3339.parse("1970-01-01T00:00:00Z"), Date(timeIntervalSince1970: 0))
        XCTAssertEqual(RFC3339.parse("2026-11-23T02:00:00Z"), Date(timeIntervalSince1970: 1_795_399_200))
        XCTAssertEqual(RFC3339.parse("2026-11-23t03:00:00+01:00"), Date(timeIntervalSince1970: 1_795_399_200))
        XCTAssertEqual(RFC3339.parse("2026-11-22 20:30:00-05:30"), Date(timeIntervalSince1970: 1_795_399_200))
        XCTAssertEqual(RFC3339.parse("2026-11-23T02:00:00.250Z")!.timeIntervalSince1970, 1_795_399_200.25, accuracy: 0.0001)
        XCTAssertNotNil(RFC3339.parse("2024-02-29T00:00:00Z"))
        XCTAssertNil(RFC3339.parse("2023-02-29T00:00:00Z"))
        XCTAssertNil(RFC3339.parse("1900-02-29T00:00:00Z"))
        XCTAssertNotNil(RFC3339.parse("2000-02-29T00:00:00Z"))
        XCTAssertNil(RFC3339.parse("2026-04-31T00:00:00Z"))
        XCTAssertNil(RFC3339.parse("2026-13-01T00:00:00Z"))
        XCTAssertNil(RFC3339.parse("2026-11-23T24:00:00Z"))
        XCTAssertNil(RFC3339.parse("2026-11-23T02:00:00"))
        XCTAssertNil(RFC3339.parse("2026-11-23T02:00:00+1:00"))
        XCTAssertNil(RFC3339.parse("2026-11-23T02:00:00.Z"))
        XCTAssertEqual(RFC3339.format(Date(timeIntervalSince1970: 1_795_399_200)), "2026-11-23T02:00:00Z")
        XCTAssertEqual(RFC3339.format(Date(timeIntervalSince1970: 1_795_399_200.5)), "2026-11-23T02:00:00.500Z")
        XCTAssertEqual(RFC3339.format(Date(timeIntervalSince1970: -86_400)), "1969-12-31T00:00:00Z")
        XCTAssertEqual(RFC3339.format(Date(timeIntervalSince1970: 951_782_400.0625)), "2000-02-29T00:00:00.062Z")
        XCTAssertEqual(RFC3339.format(Date(timeIntervalSince1970: 253_402_300_799)), "9999-12-31T23:59:59Z")
        for seconds in stride(from: 0.0, to: 4_000_000_000, by: 39_916_801.25) {
            let date = Date(timeIntervalSince1970: seconds)
            XCTAssertEqual(RFC3339.parse(RFC3339.format(date))!.timeIntervalSince1970, seconds, accuracy: 0.001)
        }
    }

    func testByteCounts() {
        XCTAssertEqual(ByteCount.parse("0"), 0)
        XCTAssertEqual(ByteCount.parse("1500"), 1500)
        XCTAssertEqual(ByteCount.parse("64k"), 65_536)
        XCTAssertEqual(ByteCount.parse("64K"), 65_536)
        XCTAssertEqual(ByteCount.parse("3MiB"), 3 << 20)
        XCTAssertEqual(ByteCount.parse("2G"), 2 << 30)
        XCTAssertEqual(ByteCount.parse("1T"), 1 << 40)
        XCTAssertNil(ByteCount.parse("8388608T"))
        XCTAssertNil(ByteCount.parse(""))
        XCTAssertNil(ByteCount.parse("k"))
        XCTAssertNil(ByteCount.parse("-1"))
        XCTAssertNil(ByteCount.parse("1.5M"))
        XCTAssertNil(ByteCount.parse("+5"))
    }

    func testSecretHeadersAreMarked() {
        XCTAssertTrue(RequestHeader(name: "authorization", value: "x").isSecret)
        XCTAssertTrue(RequestHeader(name: "Cookie", value: "x").isSecret)
        XCTAssertTrue(RequestHeader(name: "Proxy-Authorization", value: "x").isSecret)
        XCTAssertFalse(RequestHeader(name: "Accept", value: "x").isSecret)
    }
}
