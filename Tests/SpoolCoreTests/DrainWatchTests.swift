import XCTest
import SpoolCore

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

    func testDisabledNeverActs() {
        var watch = DrainWatch(enabled: false)
        XCTAssertEqual(watch.turn(onlyEndingsLeft: true), .none)
        XCTAssertEqual(watch.phase, .watching)
        XCTAssertFalse(watch.blocksExit)
        XCTAssertFalse(watch.needsLastListing)
    }
}

/// `DueDrainTally`: what keeps a due drain going, and what it leaves for the next run.
final class DueDrainTallyTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 2_000_000)

    func testUnderWayOrDueKeepsTheDrainGoing() {
        for phase: ItemPhase in [.running, .retrying] {
            var tally = DueDrainTally(now: now, unreachable: [], windowOpen: true)
            XCTAssertFalse(tally.count(phase, earliestStart: nil, discretionary: false, hostKey: { "h:80" }), "\(phase)")
        }
        var tally = DueDrainTally(now: now, unreachable: [], windowOpen: true)
        XCTAssertFalse(tally.count(.queued, earliestStart: now, discretionary: false, hostKey: { "h:80" }), "due now")
        XCTAssertFalse(tally.count(.queued, earliestStart: nil, discretionary: true, hostKey: { "h:80" }), "window open")
    }

    func testNotDueHostsAndSpaceAreLeftAndCountedApart() {
        var tally = DueDrainTally(now: now, unreachable: ["down:443"], windowOpen: false)
        XCTAssertTrue(tally.count(.queued, earliestStart: now.addingTimeInterval(60), discretionary: false, hostKey: { "h:80" }))
        XCTAssertTrue(tally.count(.queued, earliestStart: nil, discretionary: true, hostKey: { "h:80" }), "window shut")
        XCTAssertTrue(tally.count(.queued, earliestStart: nil, discretionary: false, hostKey: { "down:443" }))
        XCTAssertTrue(tally.count(.waitingForSpace, earliestStart: nil, discretionary: false, hostKey: { "h:80" }))
        XCTAssertTrue(tally.count(.waitingToPublish, earliestStart: nil, discretionary: false, hostKey: { "h:80" }))
        XCTAssertTrue(tally.count(.paused, earliestStart: nil, discretionary: false, hostKey: { "h:80" }))
        tally.leaveDormant(3)
        XCTAssertEqual(tally.left, 8)
        XCTAssertEqual(tally.forHosts, 1)
        XCTAssertEqual(tally.forSpace, 2)
        XCTAssertFalse(tally.isDue(earliestStart: now.addingTimeInterval(1), discretionary: false, hostKey: { "down:443" }),
                       "not started: its host is not asked")
        XCTAssertEqual(tally.forHosts, 1)
    }
}
