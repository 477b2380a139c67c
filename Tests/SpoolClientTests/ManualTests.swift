import Foundation
@testable import SpoolClient
@testable import SpoolRequest
import SpoolStore
import XCTest

/// The README is the one text of the spool's formats; spoolfetch(5) is generated from it
/// (scripts/make-manpage5). These keep the README complete against the code — every request key,
/// every marker, error-file and event field, every hook variable, every command — and the man
/// page's tables equal to the README's.
final class ManualTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    private func readme() throws -> String {
        try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
    }

    /// The README's text from `heading` to the next heading of its level or higher.
    private func section(_ heading: String, in text: String) throws -> String {
        let lines = text.components(separatedBy: "\n")
        let start = try XCTUnwrap(lines.firstIndex(of: heading), "README has \(heading)")
        let level = heading.prefix { $0 == "#" }.count
        var fence = false
        var out: [String] = []
        for line in lines[(start + 1)...] {
            if line.hasPrefix("```") { fence.toggle() }
            if !fence, line.hasPrefix("#"), line.prefix(while: { $0 == "#" }).count <= level, line.contains(" ") { break }
            out.append(line)
        }
        return out.joined(separator: "\n")
    }

    /// The stored properties' names: the JSON keys of these records.
    private func fields(_ value: Any) -> [String] { Mirror(reflecting: value).children.compactMap(\.label) }

    func testTheREADMEDocumentsEveryKeyFieldAndVariable() throws {
        let text = try readme()
        let requests = try section("## Request files", in: text)
        for key in RequestKey.allCases {
            XCTAssertTrue(requests.contains("| `\(key.rawValue)` |"), "request key \(key.rawValue) has no row in README's key table")
        }
        let markers = try section("## Markers and error files", in: text)
        let marker = ItemMarker(request: "", group: "", index: 0, url: "", finalURL: nil, name: "", bytes: 0, sha256: "",
                                httpStatus: 0, etag: nil, lastModified: nil, contentType: nil, startedAt: "", finishedAt: "",
                                attempts: 0)
        let failure = ItemFailure(index: 0, url: "", name: "", code: "", message: "", attempts: 0)
        let records: [(String, Any)] = [
            ("NAME.done", marker), ("R.error items", failure),
            ("group marker", GroupMarker(group: "", request: "", finishedAt: "", items: [])),
            ("group marker items", GroupItem(index: 0, url: "", outcome: "")),
            ("R.error", ErrorRecord(request: "", code: "", message: "")),
        ]
        for (record, value) in records {
            for field in fields(value) {
                XCTAssertTrue(markers.contains("`\(field)`"), "\(record) field \(field) is not in README's \"Markers and error files\"")
            }
        }
        let events = try section("## Waiting and events", in: text)
        let event = SpoolEvent(event: "", outcome: "", request: "", record: "", at: "", cursor: "")
        for field in fields(event) {
            XCTAssertTrue(events.contains("`\(field)`"), "events field \(field) is not in README's \"Waiting and events\"")
        }
        // Every SPOOLFETCH_ variable the daemon hands a hook.
        let hooks = Self.root.appendingPathComponent("Sources/SpoolDaemon/Hooks")
        var variables = Set<String>()
        for file in try FileManager.default.contentsOfDirectory(atPath: hooks.path) where file.hasSuffix(".swift") {
            let source = try String(contentsOf: hooks.appendingPathComponent(file), encoding: .utf8)
            let regex = try NSRegularExpression(pattern: #"SPOOLFETCH_[A-Z0-9_]+"#)
            for match in regex.matches(in: source, range: NSRange(source.startIndex..., in: source)) {
                variables.insert(String(source[Range(match.range, in: source)!]))
            }
        }
        XCTAssertGreaterThan(variables.count, 10)
        for variable in variables {
            XCTAssertTrue(text.contains("`\(variable)`"), "hook variable \(variable) is not in the README")
        }
    }

    /// Cells of every markdown table in `text`, inline marks removed (as the man page shows them).
    private func markdownTables(_ text: String) -> [[String]] {
        var rows: [[String]] = []
        var fence = false
        for line in text.components(separatedBy: "\n") {
            if line.hasPrefix("```") { fence.toggle() }
            guard !fence, line.hasPrefix("|") else { continue }
            let cells = line.replacingOccurrences(of: "\\|", with: "\u{1}").split(separator: "|", omittingEmptySubsequences: false)
                .dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "\u{1}", with: "|")
                    .replacingOccurrences(of: "`", with: "").replacingOccurrences(of: "**", with: "") }
            if cells.first?.allSatisfy({ $0 == "-" }) == true { continue }
            rows.append(cells)
        }
        return rows
    }

    /// Cells of every tbl table in a man page, font changes and escapes removed.
    private func manTables(_ page: String) -> [[String]] {
        var rows: [[String]] = []
        var inTable = false, formatDone = false
        var row: [String] = [], cell: [String]? = nil
        for line in page.components(separatedBy: "\n") {
            if line == ".TS" { inTable = true; formatDone = false; continue }
            if line == ".TE" { inTable = false; continue }
            guard inTable else { continue }
            if !formatDone { if line.hasSuffix(".") { formatDone = true }; continue }
            if var open = cell {
                if line.hasPrefix("T}") {
                    row.append(open.joined(separator: "\n").replacingOccurrences(of: "\\fB", with: "")
                        .replacingOccurrences(of: "\\fR", with: "").replacingOccurrences(of: "\\e", with: "\\"))
                    cell = nil
                    if !line.hasSuffix("^T{") { rows.append(row); row = [] } else { cell = [] }
                } else {
                    open.append(line)
                    cell = open
                }
            } else if line.hasSuffix("T{") {
                cell = []
            }
        }
        return rows
    }

    func testSpoolfetch5IsTheREADMEsSectionsWithTheirTablesEqual() throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("spoolfetch-\(getpid()).5").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let p = Process()
        p.executableURL = Self.root.appendingPathComponent("scripts/make-manpage5")
        p.arguments = [Self.root.appendingPathComponent("README.md").path, "test", out]
        try p.run()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        let page = try String(contentsOfFile: out, encoding: .utf8)
        let text = try readme()
        var expected: [[String]] = []
        let initSection = "### A spool for several producers (`spoolfetch init`)"
        for heading in ["### Exit status", "## The spool (the API)", "## Request files", "## Markers and error files",
                        "## Waiting and events", "## Security model", "## Hooks", initSection] {
            expected += markdownTables(try section(heading, in: text))
            let title = ["### Exit status": "EXIT STATUS", "## The spool (the API)": "SPOOL FOLDERS",
                         "## Request files": "REQUEST FILES", "## Markers and error files": "MARKERS AND ERROR FILES",
                         "## Waiting and events": "EVENTS", "## Security model": "SECURITY MODEL", "## Hooks": "HOOK VARIABLES",
                         initSection: "OWNERS AND MODES"][heading]!
            XCTAssertTrue(page.contains(".SH \"\(title)\""), "spoolfetch(5) has \(title)")
        }
        XCTAssertGreaterThanOrEqual(expected.count, 50, "the README's key, folder, exit and variable tables")
        XCTAssertEqual(manTables(page), expected, "spoolfetch(5)'s tables are the README's, row for row")
        for key in RequestKey.allCases { XCTAssertTrue(page.contains("\\fB\(key.rawValue)\\fR"), "spoolfetch(5) names \(key.rawValue)") }
    }

    /// The README's table of contents lists its `##` sections, in order, with working anchors.
    func testTheTableOfContentsListsEverySection() throws {
        let text = try readme()
        var headings: [String] = []
        var fence = false
        for line in text.components(separatedBy: "\n") {
            if line.hasPrefix("```") { fence.toggle() }
            if !fence, line.hasPrefix("## ") { headings.append(String(line.dropFirst(3))) }
        }
        let contents = try section("## Contents", in: text)
        let listed = contents.components(separatedBy: "\n").compactMap { line -> (String, String)? in
            guard let open = line.firstIndex(of: "["), let close = line.firstIndex(of: "]"),
                  let paren = line.range(of: "](#") else { return nil }
            let anchor = line[paren.upperBound...].prefix { $0 != ")" }
            return (String(line[line.index(after: open)..<close]), String(anchor))
        }
        XCTAssertEqual(listed.map(\.0), headings.filter { $0 != "Contents" })
        for (title, anchor) in listed {
            // GitHub's anchors: lower case, punctuation but - and _ dropped, spaces to -.
            let expected = title.lowercased().filter { $0.isLetter || $0.isNumber || $0 == " " || $0 == "-" || $0 == "_" }
                .replacingOccurrences(of: " ", with: "-")
            XCTAssertEqual(anchor, expected, title)
        }
    }
}
