import Foundation
import SpoolTestSupport
import XCTest

/// `spoolfetch probe HOST`: a host that could not be reached is tried now, not at its next probe
/// on the back-off; `retry` of an item waiting on it says so. Who may: root, the daemon's user,
/// operators, or a producer whose own request waits on the host.
final class HostProbeTests: SpoolTestCase {
    private let accounts = TestAccounts()

    override func tearDownWithError() throws {
        accounts.removeAll()
        try super.tearDownWithError()
    }

    /// The daemon's report of `host` as unreachable (`unreachableHosts`), read as `user`.
    private func outage(_ host: String, as user: String? = nil) -> [String: Any]? {
        let arguments = ["status", "--json", "--spool", spool.root]
        let out: String
        if let user {
            guard let r = try? TestAccounts.run(as: user, [DaemonProcess.executablePath] + arguments), r.status == 0 else { return nil }
            out = r.out
        } else {
            guard let p = try? DaemonProcess.launch(arguments), (try? p.waitForExit(timeout: 30)) == 0 else { return nil }
            out = p.stdoutText
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any],
              let daemons = object["daemons"] as? [[String: Any]] else { return nil }
        return daemons.lazy.compactMap { $0["unreachableHosts"] as? [[String: Any]] }.joined().first { $0["host"] as? String == host }
    }

    private func date(_ text: Any?) -> Date? {
        guard let text = text as? String else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text)
    }

    func testProbeTriesAHeldHostNowAndItsItemIsPublishedBeforeItsNextProbe() throws {
        let down = try RefusingPort()
        let host = "127.0.0.1:\(down.port)"
        try spool.drop("later", "url: http://\(host)/x\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }
        // The probe back-off doubles from 1 s: wait until the next probe is at least 6 s away.
        var nextProbe = Date.distantPast
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 120, what: "\(host)'s next probe 6 s away") {
            guard let o = outage(host), let next = date(o["nextProbe"]) else { return false }
            nextProbe = next
            return next.timeIntervalSinceNow >= 6
        }

        let retry = try DaemonProcess.launch(["retry", "later#0", "--spool", spool.root])
        XCTAssertEqual(try retry.waitForExit(timeout: 30), 2, retry.stdoutText)
        XCTAssertTrue(retry.stderrText.contains("spoolfetch probe \(host) probes it now"), retry.stderrText)

        down.close()
        let back = try TestHTTPServer.start(port: down.port)
        defer { try? back.shutdown() }
        back.serve("/x", body: Array("back".utf8))
        let probe = try DaemonProcess.launch(["probe", host, "--spool", spool.root])
        XCTAssertEqual(try probe.waitForExit(timeout: 30), 0, probe.stderrText)
        XCTAssertTrue(probe.stdoutText.contains("probe: \(host) (unreachable since"), probe.stdoutText)
        XCTAssertTrue(probe.stdoutText.contains("is probed now"), probe.stdoutText)
        try DirectoryWaiter.waitForFile("x.done", in: spool.path("final"), timeout: 60)
        XCTAssertLessThan(Date(), nextProbe, "published before the back-off's probe was due: the command probed it")
        XCTAssertEqual(try spool.read("final", "x"), Array("back".utf8))
        XCTAssertTrue(daemon.stderrText.contains("probing an unreachable host now"), daemon.stderrText)

        let again = try DaemonProcess.launch(["probe", "127.0.0.1", "--spool", spool.root])
        XCTAssertEqual(try again.waitForExit(timeout: 30), 2)
        XCTAssertTrue(again.stderrText.contains("127.0.0.1 is not unreachable"), again.stderrText)
        let url = try DaemonProcess.launch(["probe", "http://\(host)/x", "--spool", spool.root])
        XCTAssertEqual(try url.waitForExit(timeout: 30), 64, "a URL is not a host: a usage error")
    }

    /// A host belongs to no one: a producer may probe one its own request waits on, and is
    /// refused for another's; root may probe any.
    func testAProducerMayProbeOnlyAHostItsOwnRequestWaitsOn() throws {
        let daemonUser = "sfTHPdaemon", producers = "sfTHPproducers", owner = "sfTHPprod1", other = "sfTHPprod2"
        try accounts.group(producers)
        try accounts.user(daemonUser, groups: [producers])
        try accounts.user(owner, groups: [producers])
        try accounts.user(other, groups: [producers])
        let made = try DaemonProcess.launch(["init", "--spool", spool.root, "--user", daemonUser, "--producers", producers])
        XCTAssertEqual(try made.waitForExit(timeout: 30), 0, made.stderrText)
        let down = try RefusingPort()
        let host = "127.0.0.1:\(down.port)"
        let tmp = spool.path("tmp", "mine"), incoming = spool.path("incoming", "mine")
        let dropped = try TestAccounts.shell(as: owner, "umask 022 && printf 'url: http://\(host)/x\\n' > '\(tmp)' && mv '\(tmp)' '\(incoming)'")
        XCTAssertEqual(dropped.status, 0, dropped.err)
        let daemon = try DaemonProcess.launch(TestAccounts.asUser(daemonUser) + [DaemonProcess.executablePath, "run", "--spool", spool.root],
                                              executable: "/usr/bin/setpriv")
        defer { daemon.terminate() }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 60, what: "\(host) unreachable") { outage(host, as: owner) != nil }

        let refused = try TestAccounts.run(as: other, [DaemonProcess.executablePath, "probe", host, "--spool", spool.root])
        XCTAssertEqual(refused.status, 2, refused.out)
        XCTAssertTrue(refused.err.contains("refused: no request of \(other)'s waits on \(host)"), refused.err)
        let mine = try TestAccounts.run(as: owner, [DaemonProcess.executablePath, "probe", host, "--spool", spool.root])
        XCTAssertEqual(mine.status, 0, mine.err)
        XCTAssertTrue(mine.out.contains("probe: \(host)"), mine.out)
        let root = try DaemonProcess.launch(["probe", host, "--spool", spool.root])
        XCTAssertEqual(try root.waitForExit(timeout: 30), 0, root.stderrText)
    }
}
