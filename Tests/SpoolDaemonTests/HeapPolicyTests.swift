import XCTest
@testable import SpoolDaemon

final class HeapPolicyTests: XCTestCase {
    /// Counts the give-backs instead of trimming this test process's heap.
    private final class GiveBacks { var count = 0 }

    func testAQuietEngineThatNeverWorkedGivesNothingBack() {
        let calls = GiveBacks()
        var heap = HeapPolicy(giveBack: { calls.count += 1 })
        for _ in 0..<3 { XCTAssertFalse(heap.turnEnded(working: false)) }
        XCTAssertEqual(calls.count, 0)
    }

    func testTheFirstQuietTurnAfterWorkGivesBackOnce() {
        let calls = GiveBacks()
        var heap = HeapPolicy(giveBack: { calls.count += 1 })
        XCTAssertFalse(heap.turnEnded(working: true))
        XCTAssertFalse(heap.turnEnded(working: true))
        XCTAssertEqual(calls.count, 0, "nothing is given back while transfers run")
        XCTAssertTrue(heap.turnEnded(working: false))
        XCTAssertFalse(heap.turnEnded(working: false))
        XCTAssertFalse(heap.turnEnded(working: false))
        XCTAssertEqual(calls.count, 1)
    }

    func testEachBurstEndsWithItsOwnGiveBack() {
        let calls = GiveBacks()
        var heap = HeapPolicy(giveBack: { calls.count += 1 })
        for working in [true, false, false, true, true, false, true, false] { heap.turnEnded(working: working) }
        XCTAssertEqual(calls.count, 3)
        XCTAssertFalse(heap.workedSinceGiveBack)
    }

    func testGlibcTakesTheSettings() {
        XCTAssertTrue(HeapPolicy.keepFreedMemoryForReuse())
    }
}
