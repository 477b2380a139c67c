import XCTest
@testable import SpoolDaemon

/// One test per row of `DrainWatch`'s table.
final class DrainWatchTests: XCTestCase {
    func testWatchingWithOnlyEndingsLeftStopsTheWatcherOnce() {
        var watch = DrainWatch(enabled: true)
        XCTAssertEqual(watch.turn(onlyEndingsLeft: false), .none)
        XCTAssertEqual(watch.phase, .watching)
        XCTAssertFalse(watch.needsLastListing)
        XCTAssertEqual(watch.turn(onlyEndingsLeft: true), .stopWatcher)
        XCTAssertEqual(watch.phase, .stopping)
        XCTAssertTrue(watch.blocksExit, "no exit while the stop is under way")
        XCTAssertEqual(watch.turn(onlyEndingsLeft: true), .none, "asked once")
    }

    func testAStopThatCouldNotBeDeliveredIsNotAskedAgain() {
        var watch = DrainWatch(enabled: true)
        XCTAssertEqual(watch.turn(onlyEndingsLeft: true), .stopWatcher)
        watch.stopNotDelivered()
        XCTAssertEqual(watch.phase, .watching)
        XCTAssertFalse(watch.blocksExit)
        XCTAssertFalse(watch.needsLastListing, "the watcher still runs")
        XCTAssertEqual(watch.turn(onlyEndingsLeft: true), .none)
    }

    func testStoppedNeedsALastListingAndADrainThatGoesOnStartsRescans() {
        var watch = DrainWatch(enabled: true)
        _ = watch.turn(onlyEndingsLeft: true)
        watch.watcherStopped()
        XCTAssertEqual(watch.phase, .stopped)
        XCTAssertFalse(watch.blocksExit)
        XCTAssertTrue(watch.needsLastListing)
        XCTAssertEqual(watch.turn(onlyEndingsLeft: true), .startRescans, "hooks or a long publish: still a turn")
        XCTAssertEqual(watch.phase, .rescanning)
        XCTAssertTrue(watch.needsLastListing, "rescans can miss the last moment: still listed before exit")
        XCTAssertEqual(watch.turn(onlyEndingsLeft: true), .none, "rescans are not stopped")
        XCTAssertEqual(watch.turn(onlyEndingsLeft: false), .none)
    }

    func testAWatcherThatStopsByItselfAfterAnUndeliveredStopIsStopped() {
        var watch = DrainWatch(enabled: true)
        _ = watch.turn(onlyEndingsLeft: true)
        watch.stopNotDelivered()
        watch.watcherStopped()          // a file of its own woke it later
        XCTAssertEqual(watch.phase, .stopped)
        XCTAssertEqual(watch.turn(onlyEndingsLeft: false), .startRescans)
    }

    func testRescansAreNeverStoppedOrReportedStopped() {
        var watch = DrainWatch(enabled: true)
        _ = watch.turn(onlyEndingsLeft: true)
        watch.watcherStopped()
        _ = watch.turn(onlyEndingsLeft: false)
        watch.watcherStopped()
        XCTAssertEqual(watch.phase, .rescanning)
    }

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

    func testDisabledNeverActs() {
        var watch = DrainWatch(enabled: false)
        XCTAssertEqual(watch.turn(onlyEndingsLeft: true), .none)
        XCTAssertEqual(watch.phase, .watching)
        XCTAssertFalse(watch.blocksExit)
        XCTAssertFalse(watch.needsLastListing)
    }
}
