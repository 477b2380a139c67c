import Foundation
import SpoolCore
import XCTest

/// `GroupEndExecutor` built with fake ports and no daemon: each effect of a request's
/// `GroupMachine` reaches its port (the write, the forget with what the write left, the retry's
/// time, the let-go's reason), and an answer a port gives at once is handled after the effects
/// of the event being handled, never inside them.
final class GroupEndExecutorTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// Ports that write down every call; a write answers at once with `answer` when set.
    final class FakePorts: GroupEndPorts {
        typealias Key = String
        typealias Written = String

        var machines: [String: GroupMachine] = [:]
        var calls: [String] = []
        var answer: GroupMachine.Event? = nil
        /// Events the next write sends for other requests (once), and what those sends returned.
        var raiseOnWrite: [(GroupMachine.Event, String)] = []
        var raisedAnswers: [[GroupMachine.Effect]?] = []
        /// Effects `decide` returns for any event instead of a machine's (a dispatch row test).
        var scripted: [GroupMachine.Effect]? = nil
        weak var executor: GroupEndExecutor<FakePorts>?
        private var depth = 0
        private(set) var nestedDecides = 0

        func decide(_ key: String, _ event: GroupMachine.Event, now: Date) -> [GroupMachine.Effect] {
            if depth != 0 { nestedDecides += 1 }
            if let scripted { return scripted }
            guard var machine = machines[key] else { return [] }
            let effects = machine.handle(event, now: now)
            machines[key] = machine
            return effects
        }

        func writeEnd(_ key: String) {
            depth += 1
            calls.append("write \(key)")
            if let answer { self.answer = nil; executor?.send(answer, to: key, now: Date(timeIntervalSince1970: 0), written: "marker") }
            let raise = raiseOnWrite
            raiseOnWrite = []
            for (event, other) in raise { raisedAnswers.append(executor?.send(event, to: other, now: Date(timeIntervalSince1970: 0))) }
            depth -= 1
        }

        func forget(_ key: String, written: String?) { calls.append("forget \(key) \(written ?? "-")") }
        func retry(_ key: String, at: Date) { calls.append("retry \(key) at \(Int(at.timeIntervalSince1970))") }
        func letGo(_ key: String, _ why: GroupLetGo) { calls.append("letGo \(key) \(why)") }
    }

    private func executor(_ ports: FakePorts) -> GroupEndExecutor<FakePorts> {
        let executor = GroupEndExecutor(ports: ports)
        ports.executor = executor
        return executor
    }

    func testTheLastItemWritesTheEndAndTheWrittenEndForgetsWithWhatItLeft() {
        let ports = FakePorts()
        ports.machines["r"] = GroupMachine(openItems: 2)
        let executor = executor(ports)
        XCTAssertEqual(executor.send(.itemEnded, to: "r", now: t0), [])
        XCTAssertEqual(ports.calls, [])
        XCTAssertEqual(executor.send(.itemEnded, to: "r", now: t0), [.writeEnd])
        XCTAssertEqual(executor.send(.endWritten, to: "r", now: t0, written: "r.done"), [.forget])
        XCTAssertEqual(ports.calls, ["write r", "forget r r.done"])
        // Unknown to the port: nothing decided, nothing carried out.
        XCTAssertEqual(executor.send(.itemEnded, to: "gone", now: t0), [])
        XCTAssertEqual(ports.calls.count, 2)
    }

    func testAFailedEndIsTimedForAnotherTryAndATakenOverOneIsLetGo() {
        let ports = FakePorts()
        ports.machines["r"] = GroupMachine(openItems: 0)
        ports.machines["s"] = GroupMachine(openItems: 0)
        let executor = executor(ports)
        executor.send(.taken, to: "r", now: t0)
        executor.send(.endFailed(GroupEndFault()), to: "r", now: t0)
        executor.send(.retryDue, to: "r", now: t0.addingTimeInterval(GroupMachine.retryDelay))
        executor.send(.taken, to: "s", now: t0)
        executor.send(.endFailed(GroupEndFault(takenOver: true)), to: "s", now: t0)
        XCTAssertEqual(ports.calls, ["write r", "retry r at \(Int(t0.timeIntervalSince1970 + GroupMachine.retryDelay))",
                                     "write r", "write s", "letGo s takenOver"])
    }

    /// A write answered at once (the simulator's) is queued: the machine is not entered while
    /// the write's port runs, and the answer is handled before the outer `send` returns.
    func testAnAnswerGivenDuringTheWriteIsHandledAfterItNeverInside() {
        let ports = FakePorts()
        ports.machines["r"] = GroupMachine(openItems: 1)
        ports.answer = .endWritten
        let executor = executor(ports)
        XCTAssertEqual(executor.send(.itemEnded, to: "r", now: t0), [.writeEnd])
        XCTAssertEqual(ports.calls, ["write r", "forget r marker"])
        XCTAssertEqual(ports.nestedDecides, 0)
        XCTAssertEqual(ports.machines["r"]?.phase, .ended)
        XCTAssertFalse(executor.isHandling)
    }

    /// Events sent from inside a port are queued (the send answers nil, nothing decided yet) and
    /// handled after the effects being carried out, in the order sent; none is decided inside
    /// another, and the queue is empty again after.
    func testEventsSentFromAPortAreHandledAfterInTheOrderSent() {
        let ports = FakePorts()
        for name in ["r", "s", "t"] { ports.machines[name] = GroupMachine(openItems: 0) }
        ports.raiseOnWrite = [(.taken, "s"), (.taken, "t")]
        let executor = executor(ports)
        XCTAssertEqual(executor.send(.taken, to: "r", now: t0), [.writeEnd])
        XCTAssertEqual(ports.raisedAnswers.count, 2)
        XCTAssertTrue(ports.raisedAnswers.allSatisfy { $0 == nil })
        XCTAssertEqual(ports.calls, ["write r", "write s", "write t"])
        XCTAssertEqual(ports.nestedDecides, 0)
        XCTAssertFalse(executor.isHandling)
        ports.machines["u"] = GroupMachine(openItems: 0)
        XCTAssertEqual(executor.send(.taken, to: "u", now: t0), [.writeEnd])
        XCTAssertEqual(ports.calls.last, "write u")
    }

    /// Each effect reaches its port, in the order decided, with what the event carried.
    func testEveryEffectReachesItsPort() {
        let ports = FakePorts()
        ports.scripted = [.writeEnd, .retry(at: t0), .letGo(.permanent), .forget]
        let executor = executor(ports)
        executor.send(.retryDue, to: "r", now: t0, written: "w")
        XCTAssertEqual(ports.calls, ["write r", "retry r at \(Int(t0.timeIntervalSince1970))", "letGo r permanent", "forget r w"])
    }
}
