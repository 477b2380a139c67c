import CNetlink
import Foundation
import SpoolNetwork
import XCTest

/// The monitor in a network namespace of the test's own (`ip netns add`, root): an address and a
/// route added there are reported within a deadline; the host's own network is never touched.
final class NetworkChangeMonitorTests: XCTestCase {
    private var namespace = ""
    private var monitor: NetworkChangeMonitor?
    private let changes = ChangeLog()

    override func setUpWithError() throws {
        namespace = "spoolfetch-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try ip(["netns", "add", namespace])
    }

    override func tearDownWithError() throws {
        monitor?.stop()
        try ip(["netns", "del", namespace])
    }

    func testAddressAndRouteThatAppearAreReported() throws {
        try startMonitorInNamespace()
        try ip(["-n", namespace, "link", "set", "lo", "up"])
        // Bringing lo up adds 127.0.0.1 and ::1 with their local routes: one debounced report.
        let up = try changes.next(within: 10)
        XCTAssertGreaterThan(up.newAddresses + up.newRoutes, 0, "\(up)")

        try ip(["-n", namespace, "addr", "add", "10.77.1.2/24", "dev", "lo"])
        let address = try changes.next(within: 10)
        XCTAssertGreaterThan(address.newAddresses, 0, "\(address)")

        try ip(["-n", namespace, "route", "add", "10.78.0.0/16", "dev", "lo"])
        let route = try changes.next(within: 10)
        XCTAssertEqual(route.newAddresses, 0, "\(route)")
        XCTAssertGreaterThan(route.newRoutes, 0, "\(route)")
    }

    func testBurstIsReportedOnce() throws {
        try startMonitorInNamespace()
        try ip(["-n", namespace, "link", "set", "lo", "up"])
        _ = try changes.next(within: 10)
        // Five addresses added back to back (well within the 0.5 s debounce of each other).
        let batch = (1...5).map { "address add 10.79.0.\($0)/32 dev lo" }.joined(separator: "\n") + "\n"
        try ip(["-n", namespace, "-batch", "-"], input: batch)
        var seen = try changes.next(within: 10).newAddresses
        // A slow machine may split the burst; the total still arrives, in at most a few reports.
        var reports = 1
        while seen < 5 && reports < 5 { seen += try changes.next(within: 10).newAddresses; reports += 1 }
        XCTAssertEqual(seen, 5)
        XCTAssertLessThanOrEqual(reports, 2, "a burst is debounced into one report (two at worst)")
    }

    // MARK: Helpers

    /// Starts the monitor from a thread that entered the test's namespace (the socket is opened
    /// there, and the monitor's own thread inherits the namespace).
    private func startMonitorInNamespace() throws {
        let log = changes
        let monitor = NetworkChangeMonitor(onChange: { log.append($0) })
        self.monitor = monitor
        let result = ResultBox()
        let path = "/var/run/netns/\(namespace)"
        let thread = Thread {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0, spoolfetch_enter_network_namespace(fd) == 0 else {
                result.set("entering \(path): \(String(cString: strerror(errno)))")
                return
            }
            close(fd)
            do { try monitor.start(); result.set(nil) } catch { result.set("\(error)") }
        }
        thread.start()
        if let failure = try result.wait(within: 10) {
            throw NSError(domain: "monitor", code: 2, userInfo: [NSLocalizedDescriptionKey: failure])
        }
    }

    private func ip(_ arguments: [String], input: String? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/sbin/ip")
        process.arguments = arguments
        let stderr = Pipe()
        process.standardError = stderr
        let stdin = Pipe()
        if input != nil { process.standardInput = stdin }
        try process.run()
        if let input {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try stdin.fileHandleForWriting.close()
        }
        process.waitUntilExit()
        let message = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw NSError(domain: "ip", code: Int(process.terminationStatus), userInfo: [
                NSLocalizedDescriptionKey: "ip \(arguments.joined(separator: " ")) failed (needs root and iproute2): \(message)"])
        }
    }
}

/// Reports from the monitor's thread, waited for with a deadline.
final class ChangeLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var queue: [NetworkChangeMonitor.Change] = []

    func append(_ change: NetworkChangeMonitor.Change) {
        condition.lock(); queue.append(change); condition.signal(); condition.unlock()
    }

    func next(within seconds: TimeInterval) throws -> NetworkChangeMonitor.Change {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty {
            if !condition.wait(until: deadline) { break }
        }
        guard !queue.isEmpty else {
            throw NSError(domain: "monitor", code: 1, userInfo: [NSLocalizedDescriptionKey: "no change reported within \(seconds) s"])
        }
        return queue.removeFirst()
    }
}

/// The start result of the monitor thread.
final class ResultBox: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: String??

    func set(_ failure: String?) { condition.lock(); value = .some(failure); condition.signal(); condition.unlock() }

    func wait(within seconds: TimeInterval) throws -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while value == nil { if !condition.wait(until: deadline) { break } }
        guard let v = value else { return "the monitor thread did not report within \(seconds) s" }
        return v
    }
}
