import XCTest
@testable import SpoolDaemon

/// What a drain's last listing of `control/` takes up (the draining room's side of `DrainWatch`).
final class DrainListingTests: XCTestCase {
    /// The last listing takes up commands for this daemon only: an answer (`res-…`) or another
    /// daemon's command left in `control/` is not new work.
    func testTheLastListingCountsOnlyCommandsForThisDaemon() {
        let pid = getpid()
        let cases: [(name: String, counts: Bool)] = [
            ("cmd-\(pid)-abc", true), ("cmd-0-abc", true), ("res-\(pid)-abc", false),
            ("cmd-\(pid + 1)-abc", false), ("cmd-\(pid)", false), ("notes.txt", false),
        ]
        for (name, counts) in cases {
            XCTAssertEqual(ControlHandler.isCommandForThisProcess(name), counts, name)
        }
    }
}
