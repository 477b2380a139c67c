import Foundation
import SpoolCore
import SpoolRequest
import XCTest

/// `ItemExecutor` built with fake ports and no daemon: each effect the machine decides reaches
/// its port with what it carries, each answer goes back to the machine, and an event a port
/// raises while effects are carried out is handled after them, never inside.
final class ItemExecutorTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// Ports that write down every call, over plain numbers for the item, its part and its job.
    final class FakePorts: ItemPorts {
        typealias Key = Int
        typealias Part = Int
        typealias Job = Int
        typealias Receipt = Int

        var machines: [Int: ItemMachine<Int, Int, Int>] = [:]
        var calls: [String] = []
        var policy = RetryPolicy(maxAttempts: 3, resourceTimeout: 3600, backoff: .init(base: 1, cap: 60))
        var now: Date
        var canRefreshURL = false
        var nextSourceLeft = false
        /// What the fake transfer does when started: open this part (through `send`, as the
        /// daemon's driver does from its callback).
        var partToOpen: Int? = nil
        var jobToQueue: Int? = 70
        var withdraws = true
        var refreshAnswer: ItemEvent<Int, Int, Int>? = nil
        weak var executor: ItemExecutor<FakePorts>?
        /// Run inside the `hostUnreachable` port, as the daemon's tells other items of the outage.
        var whileHostUnreachable: () -> Void = {}
        /// Port calls under way: `decide` must never run inside one.
        private(set) var depth = 0
        private(set) var nestedDecides = 0

        init(now: Date) { self.now = now }

        func call(_ text: String, _ body: () -> Void = {}) {
            depth += 1
            calls.append(text)
            body()
            depth -= 1
        }

        func decide(_ key: Int, _ event: ItemEvent<Int, Int, Int>) -> [ItemEffect<Int, Int>] {
            if depth != 0 { nestedDecides += 1 }
            guard var machine = machines[key], !machine.phase.hasEnded else { return [] }
            var context = ItemContext(now: now, stopping: false, jitter: 0,
                                      failureFacts: { ItemFailureFacts(index: key, url: "http://h/\(key)", name: "f\(key)") })
            context.canRefreshURL = canRefreshURL
            context.nextSource = nextSourceLeft
            let effects = machine.handle(event, policy: policy, context: context)
            machines[key] = machine
            calls.append("decided \(key) -> \(machine.phase.label)")
            return effects
        }

        func schedule(_ key: Int) { call("schedule \(key)") }
        func unschedule(_ key: Int) { call("unschedule \(key)") }
        func releaseSlot(_ key: Int) { call("releaseSlot \(key)") }
        func retry(_ key: Int, at: Date, holdHost: Bool) {
            call("retry \(key) +\(Int(at.timeIntervalSince(now)))s hold \(holdHost)")
        }
        func hostUnreachable(_ key: Int, error: String) { call("hostUnreachable \(key) \(error)", whileHostUnreachable) }
        func checkStart(_ key: Int) -> StartCheck {
            call("checkStart \(key)")
            return StartCheck(credentials: [RequestHeader(name: "Authorization", value: "Bearer k")])
        }
        func startTransfer(_ key: Int, credentials: [RequestHeader]) {
            call("startTransfer \(key) \(credentials.map(\.name))") {
                if let part = partToOpen {
                    let answer = executor?.send(.partOpened(part), to: key)
                    calls.append("sent partOpened \(part): \(answer == nil ? "queued" : "handled at once")")
                }
            }
        }
        func stopTransfer(_ key: Int, part: Int?) { call("stopTransfer \(key) part \(part.map(String.init) ?? "none")") }
        func nextSource(_ key: Int, part: Int?) { call("nextSource \(key) part \(part.map(String.init) ?? "none")") }
        func saveResumeState(_ key: Int, part: Int?) { call("saveResumeState \(key) part \(part.map(String.init) ?? "none")") }
        func refreshURL(_ key: Int, reason: String) -> ItemEvent<Int, Int, Int>? {
            call("refreshURL \(key) \(reason)")
            return refreshAnswer
        }
        func waitForSpace(_ key: Int, reason: String) { call("waitForSpace \(key) \(reason)") }
        func leaveSpaceQueue(_ key: Int) { call("leaveSpaceQueue \(key)") }
        func publish(_ key: Int, sha256: String, part: Int?) -> Int? {
            call("publish \(key) \(sha256) part \(part.map(String.init) ?? "none")")
            return jobToQueue
        }
        func retryPublish(_ key: Int, job: Int?, at: Date) {
            call("retryPublish \(key) job \(job.map(String.init) ?? "none") +\(Int(at.timeIntervalSince(now)))s")
        }
        func withdrawPublish(_ key: Int) -> Bool {
            call("withdrawPublish \(key)")
            return withdraws
        }
        func discardPartial(_ key: Int) { call("discardPartial \(key)") }
        func keepPartialForRetry(_ key: Int) { call("keepPartialForRetry \(key)") }
        func failed(_ key: Int, _ failure: ItemFailed, wasPublishing: Bool) {
            call("failed \(key) \(failure.code) \(failure.facts.url) attempts \(failure.attempts) wasPublishing \(wasPublishing)")
        }
        func ended(_ key: Int) { call("ended \(key)") }
    }

    private func make(items: [Int] = [1]) -> (ItemExecutor<FakePorts>, FakePorts) {
        let ports = FakePorts(now: t0)
        for key in items { ports.machines[key] = ItemMachine(firstQueued: t0) }
        let executor = ItemExecutor(ports: ports)
        ports.executor = executor
        return (executor, ports)
    }

    /// Drives item `key` to running, holding `part`; the calls made on the way are dropped.
    private func running(_ executor: ItemExecutor<FakePorts>, _ ports: FakePorts, key: Int = 1, part: Int? = 7) {
        ports.partToOpen = part
        executor.send(.submitted, to: key)
        executor.send(.slotGranted(space: .fits), to: key)
        XCTAssertEqual(ports.machines[key]?.phase, .running)
        XCTAssertEqual(ports.machines[key]?.state.part, part)
        ports.calls = []
    }

    /// The start chain: the start check's answer and the part the transfer opened reach the
    /// machine after the effects that asked for them, and the part comes back with the effects
    /// that need it (the publish).
    func testAStartAndAPublishGoThroughTheirPortsWithWhatTheyNeed() {
        let (executor, ports) = make()
        ports.partToOpen = 7
        XCTAssertEqual(executor.send(.submitted, to: 1), [.schedule])
        XCTAssertEqual(executor.send(.slotGranted(space: .fits), to: 1), [.prepareStart])
        XCTAssertEqual(ports.calls, [
            "decided 1 -> pending", "schedule 1",
            "decided 1 -> running", "checkStart 1",
            "decided 1 -> running", "startTransfer 1 [\"Authorization\"]", "sent partOpened 7: queued",
            "decided 1 -> running",
        ])
        XCTAssertEqual(ports.machines[1]?.state.part, 7)
        ports.calls = []
        executor.send(.transferEnded(TransferEnd(fault: nil, sha256: "abc", hasPartial: true)), to: 1)
        XCTAssertEqual(ports.calls, ["decided 1 -> publishing", "releaseSlot 1", "publish 1 abc part 7", "decided 1 -> publishing"])
        XCTAssertEqual(ports.machines[1]?.state.job, 70, "the queued job is the machine's")
        ports.calls = []
        executor.send(.publishFailed(PublishFault(message: "EIO"), job: nil), to: 1)
        XCTAssertEqual(ports.calls, ["decided 1 -> publishing", "retryPublish 1 job 70 +5s"])
        ports.calls = []
        executor.send(.publishSucceeded(file: "f1", marker: "f1.done"), to: 1)
        XCTAssertEqual(ports.calls, ["decided 1 -> done", "ended 1"])
        XCTAssertEqual(ports.nestedDecides, 0)
    }

    /// A cancel of a publishing item: its job withdrawn, then the failure, which names the
    /// publishing phase it left, and the ending.
    func testAWithdrawnJobFailsTheItemAsLeavingThePublisher() {
        let (executor, ports) = make()
        running(executor, ports)
        executor.send(.transferEnded(TransferEnd(fault: nil, sha256: "abc", hasPartial: true)), to: 1)
        ports.calls = []
        executor.send(.operatorCommand(.cancel), to: 1)
        XCTAssertEqual(ports.calls, ["decided 1 -> publishing", "withdrawPublish 1", "decided 1 -> failed",
                                     "failed 1 cancelled http://h/1 attempts 1 wasPublishing true", "ended 1"])
        ports.withdraws = false
        XCTAssertEqual(executor.send(.operatorCommand(.cancel), to: 1), [], "ended: nothing more")
    }

    /// The effects that act on a running transfer get the part the running phase held.
    func testStoppingATransferHandsItsPartToTheTransferPorts() {
        let (executor, ports) = make()
        running(executor, ports)
        executor.send(.preempted, to: 1)
        XCTAssertEqual(ports.calls, ["decided 1 -> pending", "stopTransfer 1 part 7", "saveResumeState 1 part 7"])

        let (cut, cutPorts) = make()
        running(cut, cutPorts, part: 9)
        cut.send(.deadlinePassed, to: 1)
        XCTAssertEqual(cutPorts.calls, ["decided 1 -> failed", "stopTransfer 1 part 9", "saveResumeState 1 part 9",
                                        "keepPartialForRetry 1", "releaseSlot 1",
                                        "failed 1 deadline http://h/1 attempts 1 wasPublishing false", "ended 1"])

        let (moving, movingPorts) = make()
        running(moving, movingPorts, part: 4)
        movingPorts.nextSourceLeft = true
        moving.send(.transferEnded(TransferEnd(fault: TransferFault(code: "http-status", description: "HTTP status 404",
                                                                    httpStatus: 404, movesToNextSource: true),
                                               hasPartial: true)), to: 1)
        XCTAssertEqual(movingPorts.calls, ["decided 1 -> pending", "releaseSlot 1", "nextSource 1 part 4", "schedule 1"])
    }

    /// Retries, outages, a full disk, a 416 and an operator's cancel of a waiting item: each to its port.
    func testWaitingEffectsReachTheSchedulerTheSpaceGateAndTheStore() {
        let (executor, ports) = make(items: [1, 2, 3, 4, 5])
        running(executor, ports, key: 1, part: nil)
        executor.send(.transferEnded(TransferEnd(fault: TransferFault(code: "http-status", description: "HTTP status 503",
                                                                      httpStatus: 503, isTransient: true),
                                                 retryAfter: 30, hasPartial: false)), to: 1)
        XCTAssertEqual(ports.calls, ["decided 1 -> retrying", "retry 1 +30s hold true", "saveResumeState 1 part none"])

        running(executor, ports, key: 2, part: 3)
        executor.send(.transferEnded(TransferEnd(fault: TransferFault(code: "connect", description: "refused", isTransient: true),
                                                 hasPartial: false, outage: true)), to: 2)
        XCTAssertEqual(ports.calls, ["decided 2 -> pending", "hostUnreachable 2 refused", "saveResumeState 2 part 3"])

        ports.calls = []
        executor.send(.submitted, to: 3)
        executor.send(.slotGranted(space: .later(reason: "staging: 1 MB free")), to: 3)
        executor.send(.operatorCommand(.cancel), to: 3)
        XCTAssertEqual(ports.calls, ["decided 3 -> pending", "schedule 3",
                                     "decided 3 -> waiting-space", "releaseSlot 3", "waitForSpace 3 staging: 1 MB free",
                                     "decided 3 -> failed", "leaveSpaceQueue 3",
                                     "failed 3 cancelled http://h/3 attempts 0 wasPublishing false", "ended 3"])

        running(executor, ports, key: 4, part: 5)
        executor.send(.transferEnded(TransferEnd(fault: TransferFault(code: "http-status", description: "HTTP status 416",
                                                                      httpStatus: 416), hasPartial: true)), to: 4)
        XCTAssertEqual(ports.calls, ["decided 4 -> retrying", "discardPartial 4", "retry 4 +0s hold false"])

        ports.calls = []
        executor.send(.submitted, to: 5)
        executor.send(.operatorCommand(.cancel), to: 5)
        XCTAssertEqual(ports.calls, ["decided 5 -> pending", "schedule 5", "decided 5 -> failed", "unschedule 5",
                                     "failed 5 cancelled http://h/5 attempts 0 wasPublishing false", "ended 5"])
    }

    /// A refresh hook that answers at once: its answer is the machine's next event, handled
    /// after the effect that asked.
    func testARefreshHooksAnswerGoesBackToTheMachine() {
        let (executor, ports) = make()
        running(executor, ports)
        ports.canRefreshURL = true
        ports.refreshAnswer = .urlRefreshed
        ports.partToOpen = nil
        executor.send(.transferEnded(TransferEnd(fault: TransferFault(code: "http-status", description: "HTTP status 403",
                                                                      httpStatus: 403), hasPartial: false)), to: 1)
        XCTAssertEqual(ports.calls, ["decided 1 -> running", "refreshURL 1 http-403",
                                     "decided 1 -> running", "checkStart 1",
                                     "decided 1 -> running", "startTransfer 1 [\"Authorization\"]"])
    }

    /// An event a port raises for another item while effects are carried out (as the daemon's
    /// outage tells the items waiting on the host) waits for them: `send` answers nil, and the
    /// machine is never entered from inside a port.
    func testAnEventRaisedDuringEffectsIsHandledAfterThemNotInside() {
        let (executor, ports) = make(items: [1, 2])
        ports.whileHostUnreachable = { [unowned ports, unowned executor] in
            XCTAssertTrue(executor.isHandling)
            let answer = executor.send(.operatorCommand(.cancel), to: 2)
            ports.calls.append("sent cancel to 2: \(answer == nil ? "queued" : "handled at once")")
        }
        running(executor, ports, key: 1, part: 7)
        executor.send(.submitted, to: 2)
        ports.calls = []
        let effects = executor.send(.transferEnded(TransferEnd(fault: TransferFault(code: "connect", description: "refused",
                                                                                    isTransient: true),
                                                               hasPartial: true, outage: true)), to: 1)
        XCTAssertEqual(effects, [.hostUnreachable(error: "refused"), .saveResumeState(part: 7)],
                       "the first event's own effects are answered; the raised one's are not among them")
        XCTAssertEqual(ports.calls, ["decided 1 -> pending", "hostUnreachable 1 refused", "sent cancel to 2: queued",
                                     "saveResumeState 1 part 7",
                                     "decided 2 -> failed", "unschedule 2",
                                     "failed 2 cancelled http://h/2 attempts 0 wasPublishing false", "ended 2"])
        XCTAssertEqual(ports.nestedDecides, 0, "no decision inside a port's call")
        XCTAssertFalse(executor.isHandling)
    }
}
