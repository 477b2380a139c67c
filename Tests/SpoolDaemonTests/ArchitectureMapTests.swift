import Foundation
import XCTest

/// docs/ARCHITECTURE.md maps every module and every source file, both ways: a file added, renamed
/// or moved to another module without its line in the map fails here, and so does a line naming
/// a file that no longer exists — so the map cannot fall behind the tree the way a hand-kept list
/// does. And no source file is over 400 lines (issue 60): past that, a file holds more than one
/// owner, and the map's one line for it says less than the file does.
final class ArchitectureMapTests: XCTestCase {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The longest a file under `Sources/` may be.
    static let mostLines = 400

    private func architecture() throws -> String {
        try String(contentsOf: Self.packageRoot.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
    }

    /// The `.swift` files under `folder` (relative to the package root), as paths relative to it.
    private func swiftFiles(under folder: String) -> [String] {
        let root = Self.packageRoot.appendingPathComponent(folder)
        var files: [String] = []
        let walker = FileManager.default.enumerator(atPath: root.path)
        while let path = walker?.nextObject() as? String {
            if path.hasSuffix(".swift") { files.append(folder + "/" + path) }
        }
        return files.sorted()
    }

    func testEveryModuleAndSourceFileIsInTheMap() throws {
        let architecture = try architecture()
        let sources = Self.packageRoot.appendingPathComponent("Sources")
        let modules = try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted()
        XCTAssertFalse(modules.isEmpty)
        for module in modules {
            XCTAssertTrue(architecture.contains(module + "/") || architecture.contains("| " + module + " |"),
                          "module \(module) is not in docs/ARCHITECTURE.md's map")
        }
        let files = swiftFiles(under: "Sources").map { ($0 as NSString).lastPathComponent }
        XCTAssertGreaterThan(files.count, 100)
        let missing = files.filter { !architecture.contains("`\($0)`") }.sorted()
        XCTAssertEqual(missing, [], "source files not named in docs/ARCHITECTURE.md's map")
    }

    /// Every `` `Name.swift` `` the map names is a file of the package (a source, a test, a
    /// benchmark, an example, the manifest): a deleted or renamed file's line fails here.
    func testEveryFileTheMapNamesExists() throws {
        let architecture = try architecture()
        let named = Set(Self.namedSwiftFiles(in: architecture))
        XCTAssertGreaterThan(named.count, 100, "the map names its files as `Name.swift`")
        var present = Set(["Package.swift"])
        for folder in ["Sources", "Tests", "Benchmarks", "Examples", "Plugins"] {
            present.formUnion(swiftFiles(under: folder).map { ($0 as NSString).lastPathComponent })
        }
        XCTAssertEqual(named.subtracting(present).sorted(), [], "docs/ARCHITECTURE.md names files that do not exist")
    }

    /// The map's check reads names the way the map writes them: `Name.swift` in backticks,
    /// also inside a longer span such as `Sources/SpoolStore/Directory.swift`.
    func testTheMapsNamesAreReadWhereverTheyStand() {
        XCTAssertEqual(Self.namedSwiftFiles(in: "| `A.swift`, `B+C.swift` | see `Sources/X/D.swift` and `e.swift` |"),
                       ["A.swift", "B+C.swift", "D.swift", "e.swift"])
        XCTAssertEqual(Self.namedSwiftFiles(in: "a swift file, `swift build`, `Swift` and A.swift outside backticks"), [])
    }

    func testNoSourceFileIsOverFourHundredLines() throws {
        var long: Set<String> = []
        var counts: [String: Int] = [:]
        for path in swiftFiles(under: "Sources") {
            let text = try String(contentsOf: Self.packageRoot.appendingPathComponent(path), encoding: .utf8)
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false).count
            if text.hasSuffix("\n") { lines -= 1 }     // as `wc -l` counts
            counts[path] = lines
            if lines > Self.mostLines { long.insert(path) }
        }
        XCTAssertGreaterThan(counts.count, 100)
        XCTAssertEqual(long.sorted().map { "\($0) (\(counts[$0]!) lines)" }, [],
                       "source files over \(Self.mostLines) lines: split them by what they own")
    }

    /// The `.swift` file names in backticked spans of `text` (the last path component of each).
    static func namedSwiftFiles(in text: String) -> [String] {
        let span = try! NSRegularExpression(pattern: "`([^`\\s]*\\.swift)`")
        return span.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            Range(match.range(at: 1), in: text).map { String(text[$0].split(separator: "/").last!) }
        }
    }
}
