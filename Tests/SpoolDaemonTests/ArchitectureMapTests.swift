import Foundation
import XCTest

/// docs/ARCHITECTURE.md maps every module and every source file: a file added, renamed or moved
/// to another module without its line in the map fails here, so the map cannot fall behind the
/// tree the way a hand-kept list does.
final class ArchitectureMapTests: XCTestCase {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func testEveryModuleAndSourceFileIsInTheMap() throws {
        let architecture = try String(contentsOf: Self.packageRoot.appendingPathComponent("docs/ARCHITECTURE.md"),
                                      encoding: .utf8)
        let sources = Self.packageRoot.appendingPathComponent("Sources")
        let modules = try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted()
        XCTAssertFalse(modules.isEmpty)
        for module in modules {
            XCTAssertTrue(architecture.contains(module + "/") || architecture.contains("| " + module + " |"),
                          "module \(module) is not in docs/ARCHITECTURE.md's map")
        }
        var files: [String] = []
        let walker = FileManager.default.enumerator(atPath: sources.path)
        while let path = walker?.nextObject() as? String {
            if path.hasSuffix(".swift") { files.append((path as NSString).lastPathComponent) }
        }
        XCTAssertGreaterThan(files.count, 100)
        let missing = files.filter { !architecture.contains("`\($0)`") }.sorted()
        XCTAssertEqual(missing, [], "source files not named in docs/ARCHITECTURE.md's map")
    }
}
