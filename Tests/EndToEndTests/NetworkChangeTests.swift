import Foundation
import SpoolTestSupport
import XCTest

/// A route or address appearing probes unreachable hosts at once, not at their next back-off
/// step. Everything happens in a network namespace the test makes (root, iproute2); the host's
/// own network is never touched.
final class NetworkChangeTests: SpoolTestCase {
    private var namespace = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        namespace = "sf-e2e-\(getpid())-\(UInt16.random(in: 0...UInt16.max))"
        try run("/usr/sbin/ip", ["netns", "add", namespace])
        try run("/usr/sbin/ip", ["-n", namespace, "link", "set", "lo", "up"])
        // Lets the test server bind an address before it exists, so it listens the moment it appears.
        try run("/usr/sbin/ip", ["netns", "exec", namespace, "sysctl", "-q", "-w", "net.ipv4.ip_nonlocal_bind=1"])
    }

    override func tearDownWithError() throws {
        try? run("/usr/sbin/ip", ["netns", "del", namespace])
        try super.tearDownWithError()
    }

    func testAnAddressThatAppearsProbesTheUnreachableHostAtOnce() throws {
        let www = spool.root + "/www"
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        try Array("back".utf8).withUnsafeBufferPointer { try Data(buffer: $0).write(to: URL(fileURLWithPath: www + "/f")) }
        let address = "10.77.3.1", port = 8089
        // A server in the namespace on an address the namespace does not have yet.
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        server.arguments = ["netns", "exec", namespace, "/usr/bin/python3", "-m", "http.server", "--bind", address,
                            "--directory", www, "\(port)"]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }

        try spool.drop("net", "url: http://\(address):\(port)/f\nname: f\n")
        let daemon = try DaemonProcess.launch(inNetworkNamespace: namespace, ["run", "--spool", spool.root])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "host unreachable; its items wait", timeout: 30)
        // Let the probe back-off grow (1, 2, 4 s …): after three failed probes the next one is
        // at least 4 s away.
        try daemon.waitForStderr(timeout: 60, what: "three failed probes") { log in
            log.components(separatedBy: "probe failed").count - 1 >= 3
        }
        let appeared = Date()
        try run("/usr/sbin/ip", ["-n", namespace, "addr", "add", "\(address)/32", "dev", "lo"])
        try DirectoryWaiter.waitForFile("f.done", in: spool.path("final"), timeout: 30)
        let took = Date().timeIntervalSince(appeared)
        print("address appeared → published in \(String(format: "%.2f", took)) s")
        XCTAssertTrue(daemon.stderrText.contains("the network changed; probing unreachable hosts now"), daemon.stderrText)
        XCTAssertLessThan(took, 3.5, "probed at once, not at the next back-off step (≥ 4 s away)")
        XCTAssertEqual(try spool.read("final", "f"), Array("back".utf8))
    }

    private func run(_ tool: String, _ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        let err = Pipe()
        p.standardError = err
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw NSError(domain: "ip", code: Int(p.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "\(tool) \(arguments.joined(separator: " ")): \(text)"])
        }
    }
}
