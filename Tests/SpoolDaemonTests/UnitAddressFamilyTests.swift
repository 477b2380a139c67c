import Foundation
import XCTest

/// The shipped systemd unit must allow every address family the daemon opens a socket of: a
/// family left out of `RestrictAddressFamilies` makes `socket()` fail with EAFNOSUPPORT under
/// systemd only, and what needs it (AF_NETLINK: network-change detection) turns itself off
/// silently. The families are read from the sources, so a new socket cannot be added without
/// the unit following.
final class UnitAddressFamilyTests: XCTestCase {
    func testTheUnitAllowsEveryAddressFamilyTheSourcesUse() throws {
        let root = ArchitectureMapTests.packageRoot
        let unit = try String(contentsOf: root.appendingPathComponent("contrib/spoolfetch.service"), encoding: .utf8)
        let line = try XCTUnwrap(unit.split(separator: "\n").first { $0.hasPrefix("RestrictAddressFamilies=") },
                                 "the unit restricts address families")
        let allowed = Set(line.dropFirst("RestrictAddressFamilies=".count).split(separator: " ").map(String.init))

        // libcurl opens AF_INET and AF_INET6 sockets itself; the rest is in our sources.
        var used: Set<String> = ["AF_INET", "AF_INET6"]
        var where_: [String: String] = [:]
        let sources = root.appendingPathComponent("Sources")
        let walker = FileManager.default.enumerator(atPath: sources.path)
        let pattern = try NSRegularExpression(pattern: "\\b[AP]F_(UNIX|LOCAL|INET6?|NETLINK|PACKET|BLUETOOTH|VSOCK|ALG|XDP)\\b")
        while let path = walker?.nextObject() as? String {
            guard path.hasSuffix(".swift") || path.hasSuffix(".h") || path.hasSuffix(".c") else { continue }
            let text = try String(contentsOf: sources.appendingPathComponent(path), encoding: .utf8)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let family = "AF_" + (text as NSString).substring(with: match.range(at: 1))
                used.insert(family == "AF_LOCAL" ? "AF_UNIX" : family)
                where_[family] = path
            }
        }
        XCTAssertTrue(used.contains("AF_NETLINK"), "the network-change monitor's netlink socket is found in the sources")
        let missing = used.subtracting(allowed).sorted()
        XCTAssertEqual(missing, [], "contrib/spoolfetch.service leaves out families the daemon uses: " +
                       missing.map { "\($0) (\(where_[$0] ?? "libcurl"))" }.joined(separator: ", "))
    }
}
