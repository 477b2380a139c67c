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

    // The item machine's own chain (a start's answers queued behind its effects, never decided
    // inside a port) is tested through the real executor: ItemExecutorTests.
}
