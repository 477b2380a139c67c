import Foundation
import SpoolTestSupport
import XCTest

/// Credentials by reference (`--netrc-file`, `--credentials-dir` + `credentials:`): they reach
/// their own host only, also after a redirect to another host, and nothing in the spool holds them.
final class CredentialsTests: SpoolTestCase {
    /// The target of cross-host redirects, addressed as `localhost` (the netrc names 127.0.0.1).
    var other: TestHTTPServer!
    var secrets: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        other = try TestHTTPServer.start()
        secrets = try TempSpool.makeScratchFolder(prefix: "spoolfetch-secrets")
        let dir = secrets!
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertEqual(chmod(dir, 0o700), 0)
        try FileManager.default.createDirectory(atPath: dir + "/credentials", withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try other.shutdown()
        other = nil
        try super.tearDownWithError()
    }

    private func write(_ path: String, _ text: String, mode: mode_t = 0o600) throws {
        try text.write(toFile: secrets + "/" + path, atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(secrets + "/" + path, mode), 0)
    }

    private func localhost(_ path: String) -> String { "http://localhost:\(other.port)\(path)" }

    func testNetrcAndCredentialsReachTheirHostOnlyAndNothingInTheSpoolHoldsThem() throws {
        try write("netrc", "machine 127.0.0.1 login alice password NETRC-SECRET-5e1\n")
        try write("credentials/api", "# the API token\nAuthorization: Bearer CRED-SECRET-9b7\n")
        for path in ["/netrc.txt", "/cred.txt"] { server.serve(path, body: Array(path.utf8)) }
        server.serve("/netrc-away", body: [], script: [.redirect(to: localhost("/away1.txt"))])
        server.serve("/cred-away", body: [], script: [.redirect(to: localhost("/away2.txt"))])
        for path in ["/away1.txt", "/away2.txt"] { other.serve(path, body: Array(path.utf8)) }
        try spool.drop("secrets", """
            url: \(server.url("/netrc.txt"))
            url: \(server.url("/netrc-away"))
            url: \(server.url("/cred.txt"))
            credentials: api
            url: \(server.url("/cred-away"))
            credentials: api
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--netrc-file", secrets + "/netrc", "--credentials-dir", secrets + "/credentials", "--log-level", "debug"])
        XCTAssertEqual(status, 0, stderr)
        for (name, body) in [("netrc.txt", "/netrc.txt"), ("cred.txt", "/cred.txt"), ("netrc-away", "/away1.txt"),
                             ("cred-away", "/away2.txt")] {
            XCTAssertEqual(try spool.read("final", name), Array(body.utf8), name)
        }
        let basic = "Basic " + Data("alice:NETRC-SECRET-5e1".utf8).base64EncodedString()
        XCTAssertEqual(server.requests(for: "/netrc.txt").first?.header("Authorization"), basic)
        XCTAssertEqual(server.requests(for: "/netrc-away").first?.header("Authorization"), basic)
        XCTAssertEqual(server.requests(for: "/cred.txt").first?.header("Authorization"), "Bearer CRED-SECRET-9b7")
        XCTAssertEqual(server.requests(for: "/cred-away").first?.header("Authorization"), "Bearer CRED-SECRET-9b7")
        XCTAssertEqual(other.allRequests.count, 2)
        for request in other.allRequests {
            XCTAssertNil(request.header("Authorization"), "\(request.uri): no credentials for another host")
        }
        // Nothing the daemon wrote, nor the request file, holds a secret.
        for secret in ["NETRC-SECRET-5e1", "CRED-SECRET-9b7", basic.dropFirst(6).description] {
            XCTAssertFalse(stderr.contains(secret), "the log must not hold \(secret)")
            for file in allFiles(under: spool.root) {
                let text = String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self)
                XCTAssertFalse(text.contains(secret), "\(file) must not hold \(secret)")
            }
        }
    }

    func testUnusableCredentialsFailTheItemWithTheReasonAndSendNothing() throws {
        try write("credentials/open", "Authorization: Bearer x\n", mode: 0o644)
        try write("credentials/apikey", "X-Api-Key: x\n")
        server.serve("/a.txt", body: Array("a".utf8))
        try spool.drop("refused", """
            url: \(server.url("/a.txt"))
            credentials: open
            url: \(server.url("/a.txt"))
            credentials: apikey
            url: \(server.url("/a.txt"))
            credentials: missing
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--credentials-dir", secrets + "/credentials"])
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(server.allRequests.isEmpty, "no request without its credentials")
        let items = try XCTUnwrap(try json("failed", "refused.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["code"] as? String }, ["credentials", "credentials", "credentials"])
        let messages = items.map { $0["message"] as? String ?? "" }
        XCTAssertTrue(messages[0].contains("is open to group or others (mode 644)"), messages[0])
        XCTAssertTrue(messages[1].contains("X-Api-Key is not allowed in a credentials file"), messages[1])
        XCTAssertTrue(messages[2].contains("missing cannot be opened: No such file or directory"), messages[2])

        // Without --credentials-dir, and with a netrc file others can read: refused, clearly.
        try spool.drop("no-dir", "url: \(server.url("/a.txt"))\ncredentials: open\n")
        let (noDir, _) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(noDir, 1)
        let noDirItems = try XCTUnwrap(try json("failed", "no-dir.error")["items"] as? [[String: Any]])
        XCTAssertEqual(noDirItems.first?["message"] as? String, "the request names credentials 'open', but the daemon has no --credentials-dir")
        try write("netrc", "machine 127.0.0.1 login a password b\n", mode: 0o640)
        let (badNetrc, netrcLog) = try DaemonProcess.drain(spool: spool.root, extra: ["--netrc-file", secrets + "/netrc"])
        XCTAssertEqual(badNetrc, 3, "a netrc file open to others is bad configuration")
        XCTAssertTrue(netrcLog.contains("--netrc-file: \(secrets!)/netrc is open to group or others (mode 640)"), netrcLog)
    }

    private func allFiles(under root: String) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: root) else { return [] }
        return e.compactMap { $0 as? String }.map { root + "/" + $0 }.filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDir) && !isDir.boolValue
        }
    }
}
