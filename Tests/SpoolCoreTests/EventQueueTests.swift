import Foundation
import SpoolCore
import XCTest

/// Events never nest (`EventQueue`): an event sent or raised while another is handled waits for
/// it, and is handled after it in the order it came.
final class EventQueueTests: XCTestCase {
    /// A handler that sends and raises events from inside: none is handled inside another (every
    /// "begin" is followed by its own "end"), each waits and is handled after, in the order it
    /// came, a send from inside is refused (the caller gets nil), and the queue is idle after.
    func testAnEventFromInsideWaitsForTheOneBeingHandled() {
        var queue = EventQueue<String>()
        var log: [String] = []
        var entered: [Bool] = []
        func send(_ event: String) {
            guard queue.enter(event) else { entered.append(false); return }
            entered.append(true)
            var inside = false
            while let next = queue.take() {
                XCTAssertFalse(inside, "\(next) handled inside another event")
                XCTAssertTrue(queue.isHandling)
                inside = true
                log.append("begin \(next)")
                switch next {
                case "a":
                    send("b")
                    queue.raise("c")
                case "b": send("d")
                default: break
                }
                log.append("end \(next)")
                inside = false
            }
        }
        XCTAssertFalse(queue.isHandling)
        send("a")
        XCTAssertEqual(entered, [true, false, false])
        XCTAssertEqual(log, ["begin a", "end a", "begin b", "end b", "begin c", "end c", "begin d", "end d"])
        XCTAssertFalse(queue.isHandling)
        // Idle again: the next event is handled at once, alone.
        log = []
        entered = []
        send("e")
        XCTAssertEqual(entered, [true])
        XCTAssertEqual(log, ["begin e", "end e"])
    }
}
