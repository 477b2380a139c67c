import Foundation
import SpoolScheduler
import XCTest

/// `--per-host` and `--concurrency` count connections: over HTTP/2 a host's transfers are
/// streams of one connection.
final class ConnectionBudgetTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let utc = TimeZone(identifier: "UTC")!

    private func starts(_ actions: [SchedulerAction]) -> [ItemKey] {
        actions.compactMap { if case .start(let k) = $0 { return k } else { return nil } }
    }

    func testUnknownHostGetsPerHostTransfersThenStreamsOnceItSpeaksHTTP2() {
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6, maxStreams: 100), timeZone: utc)
        for k in 1...500 { s.submit(ScheduledItem(key: k, hostKey: "a:443")) }
        XCTAssertEqual(starts(s.nextActions(now: t0)).count, 6, "HTTP/1.1 until a response says otherwise")
        XCTAssertEqual(s.connectionsInUse, 6)
        XCTAssertTrue(s.hostSpoke("a:443", multiplexes: true))
        XCTAssertFalse(s.hostSpoke("a:443", multiplexes: true), "nothing new")
        XCTAssertEqual(s.connectionsInUse, 1, "six streams of one connection")
        XCTAssertEqual(starts(s.nextActions(now: t0)).count, 94, "up to max-streams on that connection")
        XCTAssertEqual(s.runningCount, 100)
        XCTAssertEqual(s.connectionsInUse, 1)
        XCTAssertEqual(s.nextActions(now: t0), [])
        s.finished(1)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [101])
    }

    func testConcurrencyCountsAnHTTP2HostOnce() {
        var s = Scheduler(configuration: .init(concurrency: 2, perHost: 6, maxStreams: 50), timeZone: utc)
        s.hostSpoke("a:443", multiplexes: true)
        for k in 1...60 { s.submit(ScheduledItem(key: k, hostKey: "a:443")) }
        for k in 61...70 { s.submit(ScheduledItem(key: k, hostKey: "b:80")) }
        for k in 71...80 { s.submit(ScheduledItem(key: k, hostKey: "c:80")) }
        let started = starts(s.nextActions(now: t0))
        XCTAssertEqual(started.filter { $0 <= 60 }.count, 50, "50 streams on one connection")
        XCTAssertEqual(started.filter { $0 > 60 }.count, 1, "one connection left for the other hosts")
        XCTAssertEqual(s.connectionsInUse, 2)
    }

    func testAHostThatFallsBackToHTTP1IsHeldToPerHostAgain() {
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 2, maxStreams: 10), timeZone: utc)
        s.hostSpoke("a:443", multiplexes: true)
        for k in 1...20 { s.submit(ScheduledItem(key: k, hostKey: "a:443")) }
        XCTAssertEqual(starts(s.nextActions(now: t0)).count, 10)
        s.hostSpoke("a:443", multiplexes: false)
        XCTAssertEqual(s.connectionsInUse, 10, "each transfer is a connection now")
        for k in 1...8 { s.finished(k) }
        XCTAssertEqual(s.nextActions(now: t0), [], "two running: per-host 2 is full")
        s.finished(9)
        XCTAssertEqual(starts(s.nextActions(now: t0)), [11])
        XCTAssertEqual(s.connectionsInUse, 2)
    }

    func testReloadedMaxStreamsCountsTheRunningAgain() {
        var s = Scheduler(configuration: .init(concurrency: 4, perHost: 6, maxStreams: 100), timeZone: utc)
        s.hostSpoke("a:443", multiplexes: true)
        for k in 1...30 { s.submit(ScheduledItem(key: k, hostKey: "a:443")) }
        XCTAssertEqual(starts(s.nextActions(now: t0)).count, 30)
        s.reconfigure(.init(concurrency: 4, perHost: 6, maxStreams: 10))
        XCTAssertEqual(s.connectionsInUse, 3, "30 streams at 10 a connection")
        for k in 31...40 { s.submit(ScheduledItem(key: k, hostKey: "a:443")) }
        XCTAssertEqual(s.nextActions(now: t0), [], "past max-streams: nothing more to that host")
    }
}

/// Segment connections: only those no waiting item of the host needs, counted like any other.
final class SegmentConnectionTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func testSparePerHostConnectionsLeaveRoomForTheWaitingItems() {
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6), timeZone: TimeZone(identifier: "UTC")!)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        XCTAssertEqual(s.nextActions(now: t0), [.start(1)])
        XCTAssertEqual(s.spareConnections(forHost: "a:80", upTo: 15), 5, "a lone file: the host's other five")
        XCTAssertEqual(s.spareConnections(forHost: "a:80", upTo: 3), 3, "within max-segments")
        s.setSegmentConnections(1, 5)
        XCTAssertEqual(s.connectionsInUse, 6)
        s.submit(ScheduledItem(key: 2, hostKey: "a:80"))
        XCTAssertEqual(s.nextActions(now: t0), [], "per-host 6 holds across segments")
        XCTAssertTrue(s.hostHasWaiting("a:80"))
        XCTAssertEqual(s.spareConnections(forHost: "a:80", upTo: 15), 0)
        s.setSegmentConnections(1, 4)
        XCTAssertEqual(s.nextActions(now: t0), [.start(2)], "a finished range's connection goes to the waiting item")
        s.finished(1)
        XCTAssertEqual(s.connectionsInUse, 1, "the item's end releases its segments")
    }

    /// Fair shares, row by row: what a segmented item may keep as items of its host wait.
    func testSegmentedItemsGiveBackWhatWaitingItemsOfTheirHostLack() {
        let utc = TimeZone(identifier: "UTC")!
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        XCTAssertEqual(s.nextActions(now: t0), [.start(1)])
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 0, "no segments held: nothing to keep")
        s.setSegmentConnections(1, 5)
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 5, "nobody waits: it keeps all five")
        s.submit(ScheduledItem(key: 9, hostKey: "b:80"))
        XCTAssertEqual(s.nextActions(now: t0), [.start(9)])
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 5, "another host's item takes nothing from it")
        s.submit(ScheduledItem(key: 2, hostKey: "a:80"))
        XCTAssertEqual(s.nextActions(now: t0), [], "per-host 6 is full")
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 4, "one waits: one connection given back")
        s.submit(ScheduledItem(key: 3, hostKey: "a:80"))
        s.submit(ScheduledItem(key: 4, hostKey: "a:80"))
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 2, "three wait: three given back")
        s.setSegmentConnections(1, 2)
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 2, "given back: what is free now fits the waiting")
        XCTAssertEqual(s.nextActions(now: t0), [.start(2), .start(3), .start(4)], "the waiting items start at once")
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 2, "nobody waits any more")
        for k in 5...12 { s.submit(ScheduledItem(key: 100 + k, hostKey: "a:80")) }
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 0, "more wait than it holds: it keeps none")
    }

    func testTwoSegmentedItemsShareTheGivingBackAndAHeldHostTakesNothing() {
        let utc = TimeZone(identifier: "UTC")!
        var s = Scheduler(configuration: .init(concurrency: 16, perHost: 6), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        s.submit(ScheduledItem(key: 2, hostKey: "a:80"))
        XCTAssertEqual(s.nextActions(now: t0), [.start(1), .start(2)])
        s.setSegmentConnections(1, 3)
        s.setSegmentConnections(2, 1)
        for k in 3...4 { s.submit(ScheduledItem(key: k, hostKey: "a:80")) }
        XCTAssertEqual(s.nextActions(now: t0), [])
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 1, "the largest holder gives back first")
        XCTAssertEqual(s.segmentConnectionsAllowed(2), 1)
        // A host held by Retry-After: its waiting items could not start anyway.
        s.holdHost("a:80", until: t0.addingTimeInterval(60))
        _ = s.nextActions(now: t0)
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 3, "a held host's items wait for the time, not for connections")
        s.releaseHold("a:80")
        _ = s.nextActions(now: t0)
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 1)
        // Concurrency full through other hosts: the waiting item lacks a connection all the same.
        var g = Scheduler(configuration: .init(concurrency: 4, perHost: 6), timeZone: utc)
        g.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        XCTAssertEqual(g.nextActions(now: t0), [.start(1)])
        g.setSegmentConnections(1, 3)
        g.submit(ScheduledItem(key: 2, hostKey: "a:80"))
        XCTAssertEqual(g.nextActions(now: t0), [])
        XCTAssertEqual(g.segmentConnectionsAllowed(1), 2, "within --concurrency 4: one given back")
    }

    func testWaitingItemsOfAnHTTP2HostNeedNoConnectionAndConcurrencyHolds() {
        var s = Scheduler(configuration: .init(concurrency: 4, perHost: 6), timeZone: TimeZone(identifier: "UTC")!)
        s.hostSpoke("a:443", multiplexes: true)
        s.submit(ScheduledItem(key: 1, hostKey: "a:443"))
        XCTAssertEqual(s.nextActions(now: t0), [.start(1)])
        XCTAssertEqual(s.spareConnections(forHost: "a:443", upTo: 15), 3, "within --concurrency 4")
        s.setSegmentConnections(1, 3)
        s.submit(ScheduledItem(key: 2, hostKey: "a:443"))
        XCTAssertEqual(s.nextActions(now: t0), [.start(2)], "a stream on the host's connection")
        s.submit(ScheduledItem(key: 3, hostKey: "b:80"))
        XCTAssertEqual(s.nextActions(now: t0), [], "no connection left for another host")
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 2, "another host's item lacks a slot of --concurrency: one given back")
        s.setSegmentConnections(1, 2)
        XCTAssertEqual(s.nextActions(now: t0), [.start(3)])
        s.submit(ScheduledItem(key: 4, hostKey: "a:443"))
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 2, "a stream waiting on the host's connection lacks none: nothing given back")
    }

    /// An item of another host that waits only for a slot of `--concurrency` never waits behind
    /// extra segments either; a host that could not start anyway (held, at its own limit) takes
    /// nothing; segments are not grown into slots such items need.
    func testItemsOfOtherHostsWaitingForConcurrencyTakeSegmentsBack() {
        let utc = TimeZone(identifier: "UTC")!
        var s = Scheduler(configuration: .init(concurrency: 6, perHost: 6), timeZone: utc)
        s.submit(ScheduledItem(key: 1, hostKey: "a:80"))
        XCTAssertEqual(s.nextActions(now: t0), [.start(1)])
        XCTAssertEqual(s.spareConnections(forHost: "a:80", upTo: 15), 5)
        s.setSegmentConnections(1, 5)
        s.submit(ScheduledItem(key: 2, hostKey: "b:80"))
        s.submit(ScheduledItem(key: 3, hostKey: "c:80"))
        XCTAssertEqual(s.nextActions(now: t0), [], "--concurrency 6 is full")
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 3, "two hosts' items lack two slots")
        s.holdHost("c:80", until: t0.addingTimeInterval(60))
        _ = s.nextActions(now: t0)
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 4, "a held host's item waits for the time, not for a slot")
        s.setSegmentConnections(1, 4)
        XCTAssertEqual(s.nextActions(now: t0), [.start(2)])
        XCTAssertEqual(s.segmentConnectionsAllowed(1), 4, "nobody else lacks a slot")
        s.releaseHold("c:80")
        _ = s.nextActions(now: t0)
        s.setSegmentConnections(1, 2)
        XCTAssertEqual(s.nextActions(now: t0), [.start(3)])
        s.submit(ScheduledItem(key: 4, hostKey: "d:80"))
        XCTAssertEqual(s.spareConnections(forHost: "a:80", upTo: 15), 0, "the free slot is the waiting item's, not a new segment's")
    }
}
