import Foundation
import SpoolCore
import XCTest

/// Events never nest: an event raised while another is handled waits for it (`SerialEvents`),
/// which is how both the daemon's executor and the simulator reach the item machine.
final class SerialEventsTests: XCTestCase {
    /// A handler that raises events from inside: none is handled inside another (every
    /// "begin" is followed by its own "end"), each raised one is handled after, in the order
    /// raised, and a post from inside answers nil (queued, nothing decided yet).
    func testARaisedEventWaitsForTheOneBeingHandled() {
        let events = SerialEvents<String>()
        var log: [String] = []
        var inside = false
        var nestedAnswers: [Int?] = []
        func handle(_ event: String) -> Int {
            XCTAssertFalse(inside, "\(event) handled inside another event")
            XCTAssertTrue(events.isHandling)
            inside = true
            log.append("begin \(event)")
            switch event {
            case "a":
                nestedAnswers.append(events.post("b", handle))
                nestedAnswers.append(events.post("c", handle))
            case "b":
                nestedAnswers.append(events.post("d", handle))
            default: break
            }
            log.append("end \(event)")
            inside = false
            return event.count
        }
        XCTAssertFalse(events.isHandling)
        let answer = events.post("a", handle)
        XCTAssertEqual(answer, 1)
        XCTAssertEqual(nestedAnswers, [nil, nil, nil])
        XCTAssertEqual(log, ["begin a", "end a", "begin b", "end b", "begin c", "end c", "begin d", "end d"])
        XCTAssertFalse(events.isHandling)
        // The queue is empty again: the next post is handled at once, alone.
        log = []
        XCTAssertEqual(events.post("e", handle), 1)
        XCTAssertEqual(log, ["begin e", "end e"])
    }

    /// The item machine's own chain (`slotGranted` → `prepareStart` → `startChecked` →
    /// `startTransfer` → `partOpened`): each answer to an effect reaches the machine after the
    /// effects of the event that asked for it were carried out, and sees the phase that event left.
    func testTheMachineIsNeverEnteredFromItsOwnEffects() {
        typealias Machine = ItemMachine<Int, Int>
        let events = SerialEvents<ItemEvent<Int, Int>>()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let policy = RetryPolicy(maxAttempts: 3, resourceTimeout: 3600, backoff: .init(base: 1, cap: 60))
        var machine = Machine(firstQueued: t0)
        var carriedOut: [String] = []
        var inside = false
        func handle(_ event: ItemEvent<Int, Int>) -> [ItemEffect<Int, Int>] {
            XCTAssertFalse(inside)
            inside = true
            defer { inside = false }
            let effects = machine.handle(event, policy: policy, context: ItemContext(now: t0, stopping: false, jitter: 0.5))
            for effect in effects {
                carriedOut.append("\(effect)")
                switch effect {
                case .prepareStart:
                    XCTAssertNil(events.post(.startChecked(StartCheck()), handle))
                    XCTAssertEqual(machine.phase, .running, "the answer is not handled before the effect returns")
                case .startTransfer:
                    XCTAssertNil(events.post(.partOpened(7), handle))
                    XCTAssertNil(machine.state.part, "the part is taken after the start's effects")
                default: break
                }
            }
            return effects
        }
        XCTAssertEqual(events.post(.submitted, handle), [.schedule])
        XCTAssertEqual(events.post(.slotGranted(space: .fits), handle), [.prepareStart])
        XCTAssertEqual(carriedOut, ["schedule", "prepareStart", "startTransfer(credentials: [])"])
        XCTAssertEqual(machine.state.part, 7)
        XCTAssertEqual(machine.attempts, 1)
    }
}
