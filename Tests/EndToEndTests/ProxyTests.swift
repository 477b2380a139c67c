import Foundation
import SpoolTestSupport
import XCTest

/// Through a forward proxy (squid, started by the test): a refusal of the tunnel fails the item at
/// once with code `proxy` and the proxy's status — not retried as if the origin had failed — and
/// a proxy that is down is reported as the proxy, not as the origin, being unreachable.
final class ProxyTests: SpoolTestCase {
    private func proxied(_ proxy: String) -> [String: String] {
        ["https_proxy": proxy, "HTTPS_PROXY": proxy, "no_proxy": "", "NO_PROXY": ""]
    }

    func testAProxysRefusalOfTheTunnelFailsAtOnceWithCodeProxyAndItsStatus() throws {
        let squid = try SquidProxy()
        // The origin is never asked: squid refuses the CONNECT by its rules (403) or for want of
        // credentials (407) before it connects anywhere.
        for (port, status) in [(squid.forbiddingPort, 403), (squid.authPort, 407)] {
            let name = "refused-\(status)"
            try spool.drop(name, "url: https://127.0.0.1:9/\(name).bin\n")
            let daemon = try DaemonProcess.launch(["run", "--once", "--spool", spool.root, "--retry-base", "0.05",
                                                   "--max-attempts", "5"], environment: proxied(squid.url(port: port)))
            XCTAssertEqual(try daemon.waitForExit(timeout: 60), 1, daemon.stderrText)
            let record = try json("failed", name + ".error")
            let item = try XCTUnwrap((record["items"] as? [[String: Any]])?.first, "\(record)")
            XCTAssertEqual(item["code"] as? String, "proxy", "\(item)")
            XCTAssertEqual(item["attempts"] as? Int, 1, "a refusal by the proxy is not tried again: \(item)")
            let message = item["message"] as? String ?? ""
            XCTAssertTrue(message.contains("the proxy \(squid.url(port: port)) answered the CONNECT to 127.0.0.1:9 with HTTP \(status)"),
                          message)
        }
        XCTAssertEqual(squid.connects().count, 2, squid.connects().joined(separator: "\n"))
    }

    func testADownProxyIsReportedAsTheProxyNotTheOrigin() throws {
        let port = try closedPort()
        let proxy = "http://127.0.0.1:\(port)"
        try spool.drop("behind-proxy", "url: https://origin.invalid/x.bin\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root], environment: proxied(proxy))
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "unreachable", timeout: 30)
        let line = try XCTUnwrap(daemon.stderrText.split(separator: "\n").first { $0.contains("unreachable") })
        XCTAssertTrue(line.contains("level=warning") && line.contains("proxy unreachable"), String(line))
        XCTAssertTrue(line.contains("proxy=\(proxy)"), String(line))
        XCTAssertTrue(line.contains("origin origin.invalid:443 was not tried"), String(line))
        XCTAssertFalse(daemon.stderrText.contains("host unreachable"), daemon.stderrText)
    }

    /// A port on 127.0.0.1 nothing listens on (bound, then closed).
    private func closedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        XCTAssertTrue(ok)
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}
