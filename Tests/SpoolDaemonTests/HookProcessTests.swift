import Foundation
import SpoolProcess
import SpoolTestSupport
import XCTest

/// One hook process on its own: what keeps HookProcess rather than a process library that ends a
/// run when the shell exits (docs/ARCHITECTURE.md, "Libraries and why").
final class HookProcessTests: XCTestCase {
    /// A shell that ends at once but leaves children holding its output: the hook lasts until the
    /// output closes or its time is up, the children's late lines are logged, and past the limit
    /// the children die with the group.
    func testChildrenLeftBehindAreReadToTheEndAndKilledWithTheGroupAtTheTimeLimit() throws {
        let log = LogCapture()
        let clock = ContinuousClock()
        let started = clock.now
        let hook = HookProcess(command: "(sleep 0.2; echo late) & sleep 60 & echo child=$!", environment: [:],
                               item: "bg#0", timeout: 1, logger: log.logger())
        let outcome = hook.run()
        let elapsed = started.duration(to: clock.now)
        XCTAssertEqual(outcome, .timedOut, log.lines.joined())
        XCTAssertGreaterThanOrEqual(elapsed, .seconds(1), "the hook ended with its shell, before its time limit")
        XCTAssertLessThan(elapsed, .seconds(HookProcess.killGrace + 5), "SIGTERM to the group ended it")
        let output = log.lines(containing: "msg=\"hook output\"")
        XCTAssertTrue(output.contains { $0.contains("item=bg#0") && $0.contains("line=late") }, log.lines.joined())
        let first = try XCTUnwrap(output.first { $0.contains("line=\"child=") || $0.contains("line=child=") }, log.lines.joined())
        let child = try XCTUnwrap(Int32(String(first.components(separatedBy: "child=").last?.prefix { $0.isNumber } ?? "")))
        // SIGTERM went to the group before the hook returned; the child's exit may still be under way.
        XCTAssertTrue(ProcessExit.wait(child, timeout: 5), "the hook's child \(child) still runs")
    }
}
