import Foundation
import XCTest

/// The publish steps are numbered alike in the code and in docs/ARCHITECTURE.md ("Durability
/// order"): each `/// Step N: name` doc comment in Publisher.swift sits on the method `name`,
/// ARCHITECTURE lists the same numbers with the same names, and `publish(_:)` calls the steps
/// in that order; a "step N" in ARCHITECTURE's section or in a source file beside Publisher.swift
/// names a step that exists. A step added, removed, renamed or moved in one place fails here until
/// the other follows.
final class DurabilityOrderTests: XCTestCase {
    private struct Step: Equatable, CustomStringConvertible {
        let number: Int
        let name: String
        var description: String { "\(number). \(name)" }
    }

    func testPublisherStepsAndArchitectureListTheSameNumbersAndNames() throws {
        // Tests/SpoolStoreTests/<this file> → the package root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let publisher = try Self.find("Publisher.swift", under: root.appendingPathComponent("Sources"))
        let code = try String(contentsOf: publisher, encoding: .utf8)
        let architecture = try String(contentsOf: root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let section = try XCTUnwrap(Self.section("## Durability order", of: architecture))

        let inCode = Self.codeSteps(code).sorted { $0.number < $1.number }
        XCTAssertGreaterThan(inCode.count, 1, "Publisher.swift has `/// Step N: name` doc comments")
        XCTAssertEqual(inCode.map(\.number), Array(1...max(inCode.count, 1)), "steps numbered 1…N, each once")
        XCTAssertEqual(Self.documentedSteps(section), inCode, "ARCHITECTURE's numbered list and the code's steps")
        XCTAssertEqual(Self.calls(of: Set(inCode.map(\.name)), inPublishOf: code), inCode.map(\.name),
                       "publish(_:) calls every step once, in the order of their numbers")
        let neighbours = try FileManager.default.contentsOfDirectory(at: publisher.deletingLastPathComponent(),
                                                                     includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "swift" }
            .map { ($0.lastPathComponent, try String(contentsOf: $0, encoding: .utf8)) }
        for (place, text) in [("ARCHITECTURE's section", String(section))] + neighbours {
            for number in Self.stepReferences(text) {
                XCTAssertTrue((1...inCode.count).contains(number), "\(place) names step \(number), which does not exist")
            }
        }
    }

    /// The file named `name` under `folder` (there must be exactly one).
    private static func find(_ name: String, under folder: URL) throws -> URL {
        let all = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.lastPathComponent == name } ?? []
        return try XCTUnwrap(all.count == 1 ? all.first : nil, "\(all.count) files named \(name) under \(folder.path)")
    }

    /// From `heading` to the next heading of its level.
    private static func section(_ heading: String, of text: String) -> Substring? {
        guard let start = text.range(of: "\n" + heading + "\n") else { return nil }
        let end = text.range(of: "\n## ", range: start.upperBound..<text.endIndex)?.lowerBound ?? text.endIndex
        return text[start.upperBound..<end]
    }

    /// Each `/// Step N: name` doc comment, checked to sit on `func name(`.
    private static func codeSteps(_ code: String) -> [Step] {
        let lines = code.split(separator: "\n", omittingEmptySubsequences: false)
        var steps: [Step] = []
        for (i, line) in lines.enumerated() {
            guard let m = line.firstMatch(of: #/^\s*/// Step (\d+): (\w+)/#), let number = Int(m.1) else { continue }
            let declaration = lines[(i + 1)...].first { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("///") }
            let function = declaration?.firstMatch(of: #/func (\w+)\(/#).map { String($0.1) }
            XCTAssertEqual(function, String(m.2), "the doc comment `Step \(number): \(m.2)` sits on its method")
            steps.append(Step(number: number, name: String(m.2)))
        }
        return steps
    }

    /// The section's numbered list: "N. `name`: why".
    private static func documentedSteps(_ section: Substring) -> [Step] {
        section.split(separator: "\n").compactMap { line in
            guard let m = line.firstMatch(of: #/^(\d+)\. `(\w+)`/#), let number = Int(m.1) else { return nil }
            return Step(number: number, name: String(m.2))
        }
    }

    /// The steps `publish(_:)` calls, in the order it calls them.
    private static func calls(of steps: Set<String>, inPublishOf code: String) -> [String] {
        guard let start = code.range(of: "func publish(") else { return [] }
        let end = code.range(of: "\n    }\n", range: start.upperBound..<code.endIndex)?.lowerBound ?? code.endIndex
        return code[start.upperBound..<end].matches(of: #/\.(\w+)\(/#).map { String($0.1) }.filter(steps.contains)
    }

    /// Every number in "step N", "steps N and M", "Step N".
    private static func stepReferences(_ text: some StringProtocol) -> [Int] {
        String(text).matches(of: #/[Ss]teps? (\d+)(?: and (\d+))?/#).flatMap { m in [Int(m.1), m.2.flatMap { Int($0) }].compactMap { $0 } }
    }
}
