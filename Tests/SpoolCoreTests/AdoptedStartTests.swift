import Foundation
import SpoolCore
import XCTest

/// `AdoptedStart`: each item's first step goes to its port, in file order, and a group that
/// counts every item ends by `GroupMachine`'s rule when the items found ended are counted down
/// (also when all were).
final class AdoptedStartTests: XCTestCase {
    final class Calls: AdoptedStartPorts {
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
        AdoptedStart.begin([(key: 2, first: .ended), (key: 0, first: .submit), (key: 1, first: .publish)], ports: ports)
        XCTAssertEqual(ports.log, ["ended 2", "submit 0", "publish 1"])
        XCTAssertEqual(ports.group.phase, .open(items: 2), "the queued and the publishing item are still open")
        XCTAssertEqual(ports.effects, [])
    }

    func testARequestWhoseItemsWereAllFoundEndedEndsItsGroup() {
        let ports = Calls()
        AdoptedStart.begin([(key: 0, first: .ended), (key: 1, first: .ended), (key: 2, first: .ended)], ports: ports)
        XCTAssertEqual(ports.effects, [.writeEnd], "the last one counted down writes the end")
        XCTAssertEqual(ports.group.handle(.taken, now: Date(timeIntervalSince1970: 0)), [], "taken after: nothing more")
    }
}
