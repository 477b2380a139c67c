import Foundation
import SpoolTestSupport
import SpoolTransfer
import XCTest

/// libcurl's own words in every `.curl` failure (its error buffer), the proxy named when one is in
/// use, and the final URL in a failed outcome.
final class FailureMessageTests: XCTestCase {
    func testConnectFailureCarriesLibcurlsDetails() throws {
        let port = try closedPort()
        let outcome = try SessionDriver().fetch("http://127.0.0.1:\(port)/x")
        guard case .curl(7, let text) = outcome.failure else { return XCTFail("\(String(describing: outcome.failure))") }
        XCTAssertTrue(text.hasPrefix("Couldn't connect to server: "), text)
        XCTAssertTrue(text.contains("Failed to connect to 127.0.0.1 port \(port)"), text)
        XCTAssertFalse(text.contains("through proxy"), text)
    }

    func testUntrustedCertificateSaysWhyNotJustTheCode() throws {
        let directory = NSTemporaryDirectory() + "spooltransfer-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificates = try TestCertificates(in: directory)
        try "hello".write(toFile: directory + "/s.txt", atomically: true, encoding: .utf8)
        let nginx = try NginxServer(root: directory, certificate: certificates.serverCertificate,
                                    key: certificates.serverKey)
        let outcome = try SessionDriver().fetch(nginx.url("/s.txt", scheme: "https"))
        guard case .curl(60, let text) = outcome.failure else { return XCTFail("\(String(describing: outcome.failure))") }
        XCTAssertTrue(text.contains("unable to get local issuer certificate"), text)
        XCTAssertEqual(outcome.failureKind, .server, "a certificate the server presents is its answer")
    }

    func testProxyFromTheEnvironmentIsNamedWithoutItsPassword() throws {
        let proxyPort = try closedPort()
        setenv("http_proxy", "http://user:secret@127.0.0.1:\(proxyPort)", 1)
        defer { unsetenv("http_proxy"); unsetenv("no_proxy") }
        // The proxy is down; the origin (never resolved: the proxy would resolve it) is not reached.
        let outcome = try SessionDriver().fetch("http://origin.invalid/file")
        guard case .curl(7, let text) = outcome.failure else { return XCTFail("\(String(describing: outcome.failure))") }
        XCTAssertTrue(text.contains("port \(proxyPort)"), "libcurl did go to the proxy: \(text)")
        // The proxy, not the origin, is named as what could not be reached.
        XCTAssertTrue(text.hasPrefix("the proxy http://127.0.0.1:\(proxyPort) could not be reached: "), text)
        XCTAssertTrue(text.hasSuffix("(the origin origin.invalid:80 was not tried)"), text)
        XCTAssertEqual(TransferFailure.unreachableProxy(in: text), "http://127.0.0.1:\(proxyPort)")
        XCTAssertFalse(text.contains("secret"), text)
        XCTAssertEqual(outcome.proxy, "http://127.0.0.1:\(proxyPort)")
        XCTAssertEqual(outcome.failureKind, .outage)

        // no_proxy exempts the host: libcurl connects directly, and no proxy is named.
        setenv("no_proxy", "127.0.0.1", 1)
        let originPort = try closedPort()
        let direct = try SessionDriver().fetch("http://127.0.0.1:\(originPort)/file")
        guard case .curl(7, let directText) = direct.failure else { return XCTFail("\(String(describing: direct.failure))") }
        XCTAssertTrue(directText.contains("port \(originPort)"), directText)
        XCTAssertNil(direct.proxy)
    }

    func testFailedOutcomeHasTheURLItWasRedirectedTo() throws {
        let server = try TestHTTPServer.start()
        defer { try? server.shutdown() }
        server.serve("/start", body: [], script: [.redirect(to: "/gone")])
        server.serve("/gone", body: [], script: [.status(410)])
        let outcome = try SessionDriver().fetch(server.url("/start"))
        XCTAssertEqual(outcome.failure, .httpStatus(410))
        XCTAssertEqual(outcome.facts.finalURL, server.url("/gone"))
    }

    // MARK: libcurl's proxy rules, repeated by ProxyEnvironment

    func testProxyVariablesFollowLibcurlsRules() {
        XCTAssertEqual(ProxyEnvironment(["http_proxy": "http://p:1"]).proxy(for: "http://h/x"), "http://p:1")
        XCTAssertNil(ProxyEnvironment(["HTTP_PROXY": "http://p:1"]).proxy(for: "http://h/x"),
                     "uppercase HTTP_PROXY is ignored (CGI's Proxy: header)")
        XCTAssertEqual(ProxyEnvironment(["HTTPS_PROXY": "http://p:2"]).proxy(for: "https://h/x"), "http://p:2")
        XCTAssertEqual(ProxyEnvironment(["https_proxy": "http://p:2", "HTTPS_PROXY": "http://q:2"]).proxy(for: "https://h/x"),
                       "http://p:2", "lowercase first")
        XCTAssertNil(ProxyEnvironment(["https_proxy": "http://p:2"]).proxy(for: "http://h/x"))
        XCTAssertEqual(ProxyEnvironment(["ALL_PROXY": "socks5://s:3"]).proxy(for: "http://h/x"), "socks5://s:3")
        XCTAssertNil(ProxyEnvironment(["http_proxy": ""]).proxy(for: "http://h/x"), "empty means none")
        XCTAssertEqual(ProxyEnvironment(["http_proxy": "u:p@p:1"]).proxy(for: "http://h/x"), "p:1")
    }

    func testNoProxyMatchesNamesSubdomainsAndNetworks() {
        let env = ["http_proxy": "http://p:1"]
        func proxied(_ noProxy: String, _ url: String) -> Bool {
            ProxyEnvironment(env.merging(["no_proxy": noProxy]) { $1 }).proxy(for: url) != nil
        }
        XCTAssertFalse(proxied("*", "http://anything/x"))
        XCTAssertFalse(proxied("example.com", "http://example.com/x"))
        XCTAssertFalse(proxied("example.com", "http://a.b.EXAMPLE.com/x"))
        XCTAssertFalse(proxied(".example.com", "http://a.example.com/x"))
        XCTAssertTrue(proxied("example.com", "http://badexample.com/x"))
        XCTAssertFalse(proxied("localhost, 10.0.0.0/8", "http://10.1.2.3:8080/x"))
        XCTAssertTrue(proxied("10.0.0.0/8", "http://11.1.2.3/x"))
        XCTAssertFalse(proxied("192.168.1.5", "http://192.168.1.5/x"))
        XCTAssertFalse(proxied("::1", "http://[::1]:8080/x"))
        XCTAssertFalse(proxied("fd00::/8", "http://[fd12::1]/x"))
        XCTAssertTrue(proxied("a.com b.com", "http://c.com/x"))
        XCTAssertFalse(ProxyEnvironment(["http_proxy": "http://p:1", "NO_PROXY": "h"]).proxy(for: "http://h/x") != nil)
    }
}
