import Foundation
import SpoolCore
import XCTest

/// `RequestStart`: each item's first step goes to its port, in file order, and a group that
/// counts every item ends by `GroupMachine`'s rule when the items found ended are counted down
/// (also when all were).
final class RequestStartTests: XCTestCase {
    final class Calls: FirstStepPorts {
        var log: [String] = []
        var group = GroupMachine(openItems: 3)
        var effects: [GroupMachine.Effect] = []
        func submit(_ key: Int) { log.append("submit \(key)") }
        func ended(_ key: Int) {
            log.append("ended \(key)")
            effects += group.handle(.itemEnded, now: Date(timeIntervalSince1970: 0))
        }
        func publish(_ key: Int) { log.append("publish \(key)") }
    }

    func testEachStepGoesToItsPortInFileOrder() {
        let ports = Calls()
        RequestStart.begin([(key: 2, first: .ended), (key: 0, first: .submit), (key: 1, first: .publish)], ports: ports)
        XCTAssertEqual(ports.log, ["ended 2", "submit 0", "publish 1"])
        XCTAssertEqual(ports.group.phase, .open(items: 2), "the queued and the publishing item are still open")
        XCTAssertEqual(ports.effects, [])
    }

    func testARequestWhoseItemsWereAllFoundEndedEndsItsGroup() {
        let ports = Calls()
        RequestStart.begin([(key: 0, first: .ended), (key: 1, first: .ended), (key: 2, first: .ended)], ports: ports)
        XCTAssertEqual(ports.effects, [.writeEnd], "the last one counted down writes the end")
        XCTAssertEqual(ports.group.handle(.taken, now: Date(timeIntervalSince1970: 0)), [], "taken after: nothing more")
    }
}

/// `AdoptedIntake.accept` and `RequestStart.start`, built with fake ports, row by row: what an
/// adopted request's items do first, what the ledger is told, what is journaled, and the order
/// of an accepted request's start.
final class AdoptedIntakeTests: XCTestCase {
    final class Ports: AdoptedIntakePorts, RequestStartPorts {
        var log: [String] = []
        var recovered: [Int: AdoptedRecovery<String>] = [:]
        var uploads: Set<Int> = []
        var isCancelled = false
        var open = 0
        func add(_ index: [Int]) -> [Int] { log.append("add \(index)"); open = index.count; return index }
        func adopted() { log.append("adopted") }
        func adoptionDropped() { log.append("dropped") }
        func cancelled() -> Bool { log.append("cancelled?"); return isCancelled }
        func recoverUpload(_ key: Int) -> Bool { uploads.contains(key) }
        func recover(_ key: Int) -> AdoptedRecovery<String> { recovered[key] ?? .schedule }
        func endCancelled(_ key: Int) { log.append("cancel \(key)") }
        func journal(_ confirmed: [String]) { log.append("journal \(confirmed)") }
        func submit(_ key: Int) { log.append("submit \(key)") }
        func ended(_ key: Int) { log.append("ended \(key)"); open -= 1 }
        func publish(_ key: Int) { log.append("publish \(key)") }
        var hasOpenItems: Bool { open > 0 }
        func scheduleDeadlines() { log.append("deadlines") }
        func taken() { log.append("taken") }
    }

    private func steps(_ s: [(key: Int, first: FirstStep)]?) -> [String]? { s?.map { "\($0.key) \($0.first)" } }

    func testARejectedOrUnreadableAdoptionIsDroppedWithNoItem() {
        for read in [RequestRead<[Int]>.rejected, .unreadable] {
            let ports = Ports()
            XCTAssertNil(AdoptedIntake.accept(read, ports: ports))
            XCTAssertEqual(ports.log, ["dropped"], "no request recorded, the ledger expects one adoption fewer")
        }
    }

    func testEachItemsFirstStepIsWhatItsRecoveryFound() {
        let ports = Ports()
        ports.recovered = [1: .ended(confirm: nil), 2: .publish]
        ports.uploads = [3]
        XCTAssertEqual(steps(AdoptedIntake.accept(.indexed([0, 1, 2, 3]), ports: ports)), ["0 submit", "1 ended", "2 publish", "3 ended"])
        XCTAssertEqual(ports.log, ["add [0, 1, 2, 3]", "adopted", "cancelled?"], "nothing to journal")
    }

    func testACancelledRequestsItemsThatWouldBeQueuedEndCancelled() {
        let ports = Ports()
        ports.isCancelled = true
        ports.recovered = [1: .publish]
        XCTAssertEqual(steps(AdoptedIntake.accept(.indexed([0, 1]), ports: ports)), ["0 ended", "1 publish"])
        XCTAssertEqual(ports.log, ["add [0, 1]", "adopted", "cancelled?", "cancel 0"], "an item with its job staged is published still")
    }

    func testRecordsFoundPublishedAreJournaledOnceAfterTheLoop() {
        let ports = Ports()
        ports.recovered = [0: .ended(confirm: "a"), 1: .ended(confirm: nil), 2: .ended(confirm: "c")]
        _ = AdoptedIntake.accept(.indexed([0, 1, 2]), ports: ports)
        XCTAssertEqual(ports.log.last, "journal [\"a\", \"c\"]")
        XCTAssertEqual(ports.log.filter { $0.hasPrefix("journal") }.count, 1)
    }

    func testAStartSchedulesDeadlinesOnlyWhileItemsAreOpenThenTakesTheGroup() {
        let ports = Ports()
        ports.open = 2
        RequestStart.start(adopted: [(key: 0, first: .ended), (key: 1, first: .submit)], ports: ports)
        XCTAssertEqual(ports.log, ["ended 0", "submit 1", "deadlines", "taken"])
        let ended = Ports()
        ended.open = 1
        RequestStart.start(adopted: [(key: 0, first: .ended)], ports: ended)
        XCTAssertEqual(ended.log, ["ended 0", "taken"], "a request found ended needs no deadline")
    }

    func testAFreshRequestsItemsAreAllQueuedInFileOrder() {
        let ports = Ports()
        ports.open = 3
        RequestStart.start(fresh: [2, 0, 1], ports: ports)
        XCTAssertEqual(ports.log, ["submit 2", "submit 0", "submit 1", "deadlines", "taken"])
    }
}
