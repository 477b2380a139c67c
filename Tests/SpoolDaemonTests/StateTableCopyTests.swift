import Foundation
import XCTest

/// One source for each state machine's table: the doc comment of the Swift file that implements
/// the machine. docs/ARCHITECTURE.md carries an exact copy under a heading of its own (same rows,
/// same order, same text; only whitespace may differ), and this test compares the two. When a
/// row changes, change the doc comment and copy the table into ARCHITECTURE.md.
///
/// The Swift file is found by its name anywhere under `Sources/`, so moving it to another module
/// does not break the test; renaming it, or rewording the marker line before its table, means
/// updating `machines` below.
final class StateTableCopyTests: XCTestCase {
    struct Machine {
        /// The Swift file's name (not its path).
        let file: String
        /// Text of a doc-comment line before the table: the table is the first run of `/// |`
        /// lines after it.
        let marker: String
        /// The heading in docs/ARCHITECTURE.md whose first table is the copy.
        let heading: String
    }

    static let machines = [
        Machine(file: "ItemMachine.swift", marker: "The transition table", heading: "## An item's lifecycle"),
        Machine(file: "RecoveryPlanner.swift", marker: "From plain facts to a recovery plan",
                heading: "## Recovering an adopted item"),
        Machine(file: "GroupMachine.swift", marker: "(it stalled past its lease) lets go at once",
                heading: "## A request's group end"),
        Machine(file: "DrainWatch.swift", marker: "When a drain (`run --once`, `run --due`) lets its inotify watcher go",
                heading: "## When a drain stops watching"),
    ]

    /// The package root: three levels above this file (`Tests/SpoolDaemonTests/…`).
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func testArchitectureCopiesEqualTheDocComments() throws {
        let architecture = try String(contentsOf: Self.packageRoot.appendingPathComponent("docs/ARCHITECTURE.md"),
                                      encoding: .utf8)
        for machine in Self.machines {
            let source = try Self.findSource(named: machine.file)
            let swiftText = try String(contentsOf: source, encoding: .utf8)
            let original = try XCTUnwrap(Self.docCommentTable(in: swiftText, after: machine.marker),
                                         "\(machine.file): no `/// |` table after a line containing \"\(machine.marker)\"")
            let copy = try XCTUnwrap(Self.markdownTable(in: architecture, under: machine.heading),
                                     "docs/ARCHITECTURE.md: no table under \"\(machine.heading)\"")
            if let difference = Self.firstDifference(original, copy) {
                XCTFail("""
                    docs/ARCHITECTURE.md "\(machine.heading)" is not an exact copy of the table in \
                    \(source.path.replacingOccurrences(of: Self.packageRoot.path + "/", with: "")) \
                    (\(original.count) rows there, \(copy.count) here); first difference, row \(difference.row + 1):
                      Swift:        \(difference.original ?? "(no row)")
                      ARCHITECTURE: \(difference.copy ?? "(no row)")
                    """)
            }
        }
    }

    /// The extraction and the comparison themselves, on small inputs.
    func testExtractionAndWhitespaceNormalisation() throws {
        let swift = """
            /// Something.
            /// | a | b |
            /// Marker line:
            ///
            ///   |  a | b  c |
            /// |---|---|
            /// | x |  y |
            ///
            /// | later | table |
            struct S {}
            """
        let markdown = """
            ## Other
            | a | b |
            ## Mine
            Text.

            | a | b c |
            |---|---|
            | x | y |

            | later | table |
            """
        let original = try XCTUnwrap(Self.docCommentTable(in: swift, after: "Marker line"))
        let copy = try XCTUnwrap(Self.markdownTable(in: markdown, under: "## Mine"))
        XCTAssertEqual(original, ["| a | b c |", "| --- | --- |", "| x | y |"])
        XCTAssertNil(Self.firstDifference(original, copy))
        XCTAssertEqual(Self.firstDifference(original, copy.dropLast() + ["| x | z |"])?.row, 2)
        XCTAssertEqual(Self.firstDifference(original, Array(copy.dropLast()))?.row, 2)
        XCTAssertNil(Self.docCommentTable(in: swift, after: "no such marker"))
        XCTAssertNil(Self.markdownTable(in: markdown, under: "## Absent"))
    }

    // MARK: - Extraction

    /// The one file named `name` under `Sources/`.
    static func findSource(named name: String) throws -> URL {
        let sources = packageRoot.appendingPathComponent("Sources")
        let paths = (FileManager.default.enumerator(atPath: sources.path)?.allObjects as? [String] ?? [])
            .filter { ($0 as NSString).lastPathComponent == name }
        guard paths.count == 1 else {
            throw Problem("expected one \(name) under Sources/, found \(paths.count): \(paths.sorted())")
        }
        return sources.appendingPathComponent(paths[0])
    }

    /// The first run of `/// |` lines after the first line that contains `marker`, normalised.
    static func docCommentTable(in text: String, after marker: String) -> [String]? {
        let lines = text.components(separatedBy: "\n")
        guard let start = lines.firstIndex(where: { $0.contains(marker) }) else { return nil }
        let comment: (String) -> String? = { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("///") else { return nil }
            return String(trimmed.dropFirst(3)).trimmingCharacters(in: .whitespaces)
        }
        return table(lines[(start + 1)...].map { comment($0) ?? "\u{0}" })
    }

    /// The first table after the line `heading` and before the next heading of its level or
    /// higher, normalised.
    static func markdownTable(in text: String, under heading: String) -> [String]? {
        let lines = text.components(separatedBy: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let start = lines.firstIndex(of: heading) else { return nil }
        let level = heading.prefix { $0 == "#" }.count
        let section = lines[(start + 1)...].prefix { line in
            let hashes = line.prefix { $0 == "#" }.count
            return !(hashes > 0 && hashes <= level && line.dropFirst(hashes).hasPrefix(" "))
        }
        return table(Array(section))
    }

    /// The first run of lines starting with `|`, each normalised.
    private static func table<Lines: Collection>(_ lines: Lines) -> [String]? where Lines.Element == String {
        guard let first = lines.firstIndex(where: { $0.hasPrefix("|") }) else { return nil }
        return lines[first...].prefix { $0.hasPrefix("|") }.map(normalised)
    }

    /// A row with only its whitespace normalised: each cell trimmed, runs of whitespace inside it
    /// made one space, cells joined by ` | `. A separator cell (`---`, `:--:`) becomes `---`
    /// whatever its length, since only its width differs between a source and a copy.
    static func normalised(_ row: String) -> String {
        var cells = row.split(separator: "|", omittingEmptySubsequences: false).map { cell in
            cell.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
        }
        if cells.first == "" { cells.removeFirst() }
        if cells.last == "" { cells.removeLast() }
        if !cells.isEmpty, cells.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0 == "-" || $0 == ":" } }) {
            cells = cells.map { _ in "---" }
        }
        return "| " + cells.joined(separator: " | ") + " |"
    }

    /// The first row where the two tables differ, or nil when they are equal.
    static func firstDifference(_ original: [String], _ copy: [String])
        -> (row: Int, original: String?, copy: String?)? {
        for row in 0..<max(original.count, copy.count) {
            let left = row < original.count ? original[row] : nil
            let right = row < copy.count ? copy[row] : nil
            if left != right { return (row, left, right) }
        }
        return nil
    }

    struct Problem: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
