import Foundation
import Logging
@testable import SpoolDaemon
import Synchronization
import XCTest

/// Hooks run as real `/bin/sh` processes; the tests wait on the runner's own completion
/// callbacks (semaphores with deadlines), never on sleeps.
final class HookRunnerTests: XCTestCase {
    private final class Outcomes: Sendable {
        let byItem = Mutex<[String: HookRunner.Outcome]>([:])
    }
    private let outcomes = Outcomes()

    private func run(_ runner: HookRunner, _ command: String, item: String, environment: [String: String] = [:],
                     done: DispatchSemaphore) {
        runner.run(command, environment: environment, item: item) { [outcomes] outcome in
            outcomes.byItem.withLock { $0[item] = outcome }
            done.signal()
        }
    }

    private func outcome(_ item: String) -> HookRunner.Outcome? { outcomes.byItem.withLock { $0[item] } }

    func testAHookPastItsTimeLimitIsKilledWithItsChildrenAndLoggedWithTheItem() throws {
        let log = LogCapture()
        let runner = HookRunner(logger: log.logger(), timeout: 0.5, maxRunning: 4)
        let done = DispatchSemaphore(value: 0)
        let clock = ContinuousClock()
        let started = clock.now
        // The shell starts a child that would outlive it, reports the child's pid, and sleeps.
        run(runner, "sleep 60 & echo child=$!; sleep 60", item: "slow#3", done: done)
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success, "the hook was not ended")
        let elapsed = started.duration(to: clock.now)
        XCTAssertLessThan(elapsed, .seconds(HookRunner.killGrace + 5), "SIGTERM ended it, not the 60 s sleep")
        XCTAssertEqual(outcome("slow#3"), .timedOut)
        runner.waitForAll()
        XCTAssertEqual(runner.running, 0)

        let killed = log.lines(containing: "msg=\"hook killed past its time limit\"")
        XCTAssertEqual(killed.count, 1, log.lines.joined())
        XCTAssertTrue(killed[0].contains("item=slow#3") && killed[0].contains("hook-timeout=0.5") && killed[0].contains("level=error"),
                      killed[0])
        let output = try XCTUnwrap(log.lines(containing: "msg=\"hook output\"").first, log.lines.joined())
        XCTAssertTrue(output.contains("item=slow#3") && output.contains("stream=stdout"), output)
        let pidText = try XCTUnwrap(output.components(separatedBy: "line=\"child=").last?.prefix { $0.isNumber })
        let child = try XCTUnwrap(Int32(pidText))
        // The background child was in the hook's process group: it is gone (or a zombie
        // waiting for init to reap it), not sleeping on.
        let stat = (try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8)) ?? ""
        let state = stat.split(separator: ")").last?.split(separator: " ").first.map(String.init)
        XCTAssertTrue(stat.isEmpty || state == "Z", "the hook's child \(child) still runs: \(stat)")
    }

    func testOutputIsLoggedLineByLineWithTheItemAndFailuresNameIt() throws {
        let log = LogCapture()
        let runner = HookRunner(logger: log.logger(), timeout: 30, maxRunning: 2)
        let done = DispatchSemaphore(value: 0)
        run(runner, #"printf 'one\ntwo\r\nno newline'; echo "oops $SPOOLFETCH_ID" >&2; exit 3"#, item: "r#7",
            environment: ["SPOOLFETCH_ID": "r#7"], done: done)
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(outcome("r#7"), .exited(3))
        let out = log.lines(containing: "stream=stdout")
        XCTAssertEqual(out.count, 3, out.joined())
        XCTAssertTrue(out.allSatisfy { $0.contains("level=info") && $0.contains("item=r#7") })
        XCTAssertTrue(out[0].hasSuffix("line=one stream=stdout\n"), out[0])
        XCTAssertTrue(out[1].hasSuffix("line=two stream=stdout\n"), out[1])
        XCTAssertTrue(out[2].contains("line=\"no newline\""), out[2])
        let err = log.lines(containing: "stream=stderr")
        XCTAssertEqual(err.count, 1)
        XCTAssertTrue(err[0].contains("level=warning") && err[0].contains("line=\"oops r#7\""), err[0])
        let failed = try XCTUnwrap(log.lines(containing: "msg=\"hook failed\"").first)
        XCTAssertTrue(failed.contains("item=r#7") && failed.contains("status=3"), failed)
        XCTAssertTrue(log.lines.allSatisfy { $0.hasPrefix("time=") && $0.hasSuffix("\n") && $0.dropLast().contains("\n") == false })
    }

    func testAtMostMaxHooksRunAtOnceAndTheRestWaitInOrder() throws {
        let log = LogCapture()
        let runner = HookRunner(logger: log.logger(), timeout: 30, maxRunning: 2)
        let dir = NSTemporaryDirectory() + "hooks-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Each hook takes one of two slot folders (mkdir is atomic) or fails with 7: a third
        // hook running at once would find both taken. It holds its slot until a release file
        // for it appears, so the test decides when hooks end.
        let hook = """
            if mkdir "$D/slot1" 2>/dev/null; then s=slot1; elif mkdir "$D/slot2" 2>/dev/null; then s=slot2; else exit 7; fi
            echo "$N" >> "$D/order"
            while [ ! -e "$D/release-$N" ]; do sleep 0.05; done
            rmdir "$D/$s"
            """
        let done = DispatchSemaphore(value: 0)
        for n in 0..<5 { run(runner, hook, item: "g#\(n)", environment: ["D": dir, "N": "\(n)"], done: done) }
        XCTAssertEqual(runner.running, 2)
        XCTAssertEqual(runner.waiting, 3)
        for n in 0..<5 {
            XCTAssertTrue(FileManager.default.createFile(atPath: "\(dir)/release-\(n)", contents: nil))
            XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        }
        runner.waitForAll()
        for n in 0..<5 { XCTAssertEqual(outcome("g#\(n)"), .exited(0), "g#\(n)") }
        let order = try String(contentsOfFile: dir + "/order", encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(order.count, 5)
        XCTAssertEqual(Set(order.prefix(2)), ["0", "1"], "the first two start first")
        XCTAssertEqual(Set(order.suffix(3)), ["2", "3", "4"], "the waiting ones start as slots free up")
        XCTAssertEqual(runner.running, 0)
        XCTAssertEqual(runner.waiting, 0)
    }

    func testTheFirstFormTakesTheItemFromTheEnvironment() throws {
        let log = LogCapture()
        let runner = HookRunner(logger: log.logger(), timeout: 300, maxRunning: 4)
        let done = DispatchSemaphore(value: 0)
        runner.run("exit 1", environment: ["SPOOLFETCH_ID": "legacy#0"]) { done.signal() }
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        XCTAssertTrue(log.lines(containing: "msg=\"hook failed\"").first?.contains("item=legacy#0") ?? false, log.lines.joined())
    }
}
