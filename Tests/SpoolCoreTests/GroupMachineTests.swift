import Foundation
import SpoolCore
import XCTest

/// `GroupMachine`'s table, row by row (its doc comment; docs/ARCHITECTURE.md copies it).
final class GroupMachineTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_000_000)

    func machine(_ phase: GroupMachine.Phase) -> GroupMachine {
        var m = GroupMachine(openItems: 2)
        switch phase {
        case .open(let n): m = GroupMachine(openItems: Int(n))
        case .ending: m = GroupMachine(openItems: 1); m.handle(.itemEnded, now: now)
        case .waitingToRetry:
            m = machine(.ending); m.handle(.endFailed(GroupEndFault()), now: now)
        case .ended: m = machine(.ending); m.handle(.endWritten, now: now)
        case .abandoned: m = machine(.ending); m.handle(.endFailed(GroupEndFault(takenOver: true)), now: now)
        }
        XCTAssertEqual(m.phase, phase)
        return m
    }

    func row(_ from: GroupMachine.Phase, _ event: GroupMachine.Event, _ to: GroupMachine.Phase, _ effects: [GroupMachine.Effect],
             file: StaticString = #filePath, line: UInt = #line) {
        var m = machine(from)
        XCTAssertEqual(m.handle(event, now: now), effects, "effects of \(from) + \(event)", file: file, line: line)
        XCTAssertEqual(m.phase, to, "phase after \(from) + \(event)", file: file, line: line)
    }

    func testEveryRow() {
        row(.open(items: 0), .taken, .ending, [.writeEnd])
        row(.open(items: 3), .taken, .open(items: 3), [])
        row(.open(items: 3), .itemEnded, .open(items: 2), [])
        row(.open(items: 1), .itemEnded, .ending, [.writeEnd])
        row(.ending, .endWritten, .ended, [.forget])
        row(.ending, .endFailed(GroupEndFault(takenOver: true)), .abandoned, [.letGo(.takenOver)])
        row(.ending, .endFailed(GroupEndFault(takenOver: true, inDrain: true)), .abandoned, [.letGo(.takenOver)])
        row(.ending, .endFailed(GroupEndFault(permanent: true, inDrain: true)), .abandoned, [.letGo(.permanent)])
        row(.ending, .endFailed(GroupEndFault(permanent: true)), .waitingToRetry, [.retry(at: now.addingTimeInterval(5))])
        row(.ending, .endFailed(GroupEndFault(inDrain: true)), .waitingToRetry, [.retry(at: now.addingTimeInterval(5))])
        row(.waitingToRetry, .retryDue, .ending, [.writeEnd])
    }

    /// "any other": nothing changes, nothing is written twice.
    func testEveryOtherPairIsIgnored() {
        let events: [GroupMachine.Event] = [.taken, .itemEnded, .endWritten, .endFailed(GroupEndFault()), .retryDue]
        func handled(_ phase: GroupMachine.Phase, _ event: GroupMachine.Event) -> Bool {
            switch (phase, event) {
            case (.open(0), .taken), (.open, .itemEnded), (.ending, .endWritten), (.ending, .endFailed),
                 (.waitingToRetry, .retryDue): return true
            default: return false
            }
        }
        for phase: GroupMachine.Phase in [.open(items: 0), .open(items: 1), .open(items: 2), .ending, .waitingToRetry, .ended, .abandoned] {
            for event in events where !handled(phase, event) {
                var m = machine(phase)
                XCTAssertEqual(m.handle(event, now: now), [], "\(phase) + \(event)")
                XCTAssertEqual(m.phase, phase, "\(phase) + \(event)")
            }
        }
    }
}
