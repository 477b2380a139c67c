import Foundation
import SpoolCore
import XCTest

/// `JournalKeeper`, rule by rule, with a port that records what it removes: a batch's journal
/// lives until the last open request it mentions has ended; one no open request mentions goes
/// at once; dead workers' journals stay until every adopted request has ended or was dropped.
final class JournalKeeperTests: XCTestCase {
    final class Removed: JournalPorts {
        var names: [[String]] = []
        func removeJournals(_ names: [String]) { self.names.append(names) }
    }

    private func keeper() -> JournalKeeper<String, Removed> { JournalKeeper(ports: Removed()) }

    func testABatchJournalGoesWhenTheLastRequestItMentionsEndsNotTheFirst() {
        let k = keeper()
        var a: [String] = [], b: [String] = []
        k.attach("j1", to: &a)
        k.attach("j1", to: &a)
        k.attach("j1", to: &b)
        k.batchAttached(["j1"])
        XCTAssertEqual(a, ["j1"], "attached once per request")
        XCTAssertEqual(k.openRequests["j1"], 2)
        XCTAssertEqual(k.ports.names, [], "both requests are open")
        k.release(&a, adopted: false)
        XCTAssertEqual(a, [])
        XCTAssertEqual(k.ports.names, [], "b is still open: its item was published by j1")
        k.release(&b, adopted: false)
        XCTAssertEqual(k.ports.names, [["j1"]])
        XCTAssertNil(k.openRequests["j1"])
    }

    func testABatchWhoseRequestsAreAllGoneLosesItsJournalAtOnce() {
        let k = keeper()
        var a: [String] = []
        k.attach("j1", to: &a)
        k.batchAttached(["j1", "j2"])
        XCTAssertEqual(k.ports.names, [["j2"]], "no open request mentions j2")
    }

    func testAJournalForOneRequestAloneLivesUntilItsGroupEnds() {
        let k = keeper()
        var a: [String] = ["j0"]
        k.attach("j1", to: &a)
        k.release(&a, adopted: false)
        XCTAssertEqual(k.ports.names, [["j1"]], "j0 is not the keeper's (never attached): left alone")
    }

    func testDeadJournalsStayUntilEveryAdoptedRequestHasEnded() {
        let k = keeper()
        k.learn(states: ["r.0": "old"], files: ["dead1"], preferring: { new, _ in new })
        k.learn(states: ["r.0": "new", "s.0": "s"], files: ["dead1", "dead2"], preferring: { new, _ in new })
        XCTAssertEqual(k.deadStates, ["r.0": "new", "s.0": "s"], "merged by `preferring`")
        XCTAssertEqual(k.deadFiles, ["dead1", "dead2"], "each file once")
        k.expectAdoptions(3)
        var a: [String] = [], b: [String] = []
        k.release(&a, adopted: true)
        k.adoptionDropped()
        XCTAssertEqual(k.ports.names, [], "one adopted request is still open")
        k.forgetDeadIfSpent()
        XCTAssertEqual(k.ports.names, [])
        k.release(&b, adopted: true)
        XCTAssertEqual(k.ports.names, [["dead1", "dead2"]])
        XCTAssertEqual(k.deadStates, [:])
        k.forgetDeadIfSpent()
        XCTAssertEqual(k.ports.names.count, 1, "removed once")
    }

    func testARequestNotAdoptedDoesNotCountAgainstTheDeadJournals() {
        let k = keeper()
        k.learn(states: [:], files: ["dead1"], preferring: { new, _ in new })
        k.expectAdoptions(1)
        var own: [String] = []
        k.release(&own, adopted: false)
        XCTAssertEqual(k.ports.names, [])
        var adopted: [String] = []
        k.release(&adopted, adopted: true)
        XCTAssertEqual(k.ports.names, [["dead1"]])
    }

    func testWithNothingAdoptedDeadJournalsGoAtOnce() {
        let k = keeper()
        k.learn(states: [:], files: ["dead1"], preferring: { new, _ in new })
        k.forgetDeadIfSpent()
        XCTAssertEqual(k.ports.names, [["dead1"]])
    }
}
