import Foundation
import SpoolTestSupport
import XCTest

/// Client certificates by reference, against nginx with `ssl_verify_client on`: a credentials
/// file's certificate and key (encrypted or not) open the server, an item without one fails with
/// `client-certificate`, a connection made with a certificate is not reused by an item without
/// one, and a redirect to another host is not followed. The credentials file and the request are
/// the README's ("Client certificates"), run as they stand.
final class ClientCertificateTests: SpoolTestCase {
    private var scratch: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-mtls")
        let dir = scratch!
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertEqual(chmod(dir, 0o700), 0)
    }

    private func openssl(_ arguments: [String]) throws {
        XCTAssertEqual(try PowerCutMount.runTool("/usr/bin/openssl", arguments), 0, "openssl \(arguments.joined(separator: " "))")
    }

    /// A client certificate signed by the test CA at `certificate`, its key at `key` (encrypted
    /// with `passphrase` when given).
    private func makeClient(_ certs: TestCertificates, certificate: String, key: String, passphrase: String?) throws {
        try FileManager.default.createDirectory(atPath: (certificate as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let ext = scratch + "/client.ext"
        try "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n".write(toFile: ext, atomically: true, encoding: .utf8)
        let plain = scratch + "/plain.key", csr = scratch + "/client.csr"
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=spoolfetch-client", "-keyout", plain, "-out", csr])
        try openssl(["x509", "-req", "-in", csr, "-CA", certs.caCertificate, "-CAkey", scratch + "/ca.key",
                     "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", certificate])
        if let passphrase {
            try openssl(["pkey", "-in", plain, "-aes256", "-passout", "pass:" + passphrase, "-out", key])
            try FileManager.default.removeItem(atPath: plain)
        } else {
            try FileManager.default.moveItem(atPath: plain, toPath: key)
        }
        XCTAssertEqual(chmod(key, 0o600), 0)
        try FileManager.default.removeItem(atPath: csr)
    }

    func testACertificateOpensTheServerAnItemWithoutOneFailsAndNoRedirectTakesItElsewhere() throws {
        let certs = try TestCertificates(in: scratch)
        let root = scratch + "/www"
        try FileManager.default.createDirectory(atPath: root + "/daily", withIntermediateDirectories: true)
        let files = ["2026-12-05.csv", "plain.csv", "open.csv", "again.csv", "here.csv", "away.csv"]
        for name in files { try Data("rows of \(name)\n".utf8).write(to: URL(fileURLWithPath: root + "/daily/" + name)) }
        let logs = scratch + "/logs"
        try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
        let format = "log_format mtls '$connection|$ssl_client_s_dn|$uri|$status';"
        // B: another origin (port) that would take a certificate if one came, and logs whose.
        let other = try NginxServer(root: root, certificate: certs.serverCertificate, key: certs.serverKey, httpDirectives: format,
                                    serverDirectives: "ssl_client_certificate \(certs.caCertificate); ssl_verify_client optional; "
                                        + "access_log \(logs)/b.log mtls;")
        // A: wants a certificate of the CA; redirects within itself and to B.
        let nginx = try NginxServer(root: root, certificate: certs.serverCertificate, key: certs.serverKey, httpDirectives: format,
                                    serverDirectives: "ssl_client_certificate \(certs.caCertificate); ssl_verify_client on; "
                                        + "access_log \(logs)/a.log mtls; "
                                        + "location = /here { return 302 /daily/here.csv; } "
                                        + "location = /away { return 302 \(other.url("/daily/away.csv", scheme: "https")); }")

        let dir = scratch + "/credentials"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // The README's credentials file and request; its key encrypted with the passphrase it shows.
        let readmeCredentials = try ReadmeExample.block(startingWith: "# /etc/spoolfetch/credentials/partner-feed")
        let request = try ClientCertificateTests.readmeRequest()
        let passphrase = try XCTUnwrap(readmeCredentials.split(separator: "\n").first { $0.hasPrefix("Client-Key-Passphrase: ") })
            .dropFirst("Client-Key-Passphrase: ".count)
        try makeClient(certs, certificate: dir + "/certs/partner-feed.pem", key: dir + "/certs/partner-feed.key",
                       passphrase: String(passphrase))
        try makeClient(certs, certificate: dir + "/certs/plain.pem", key: dir + "/certs/plain.key", passphrase: nil)
        func write(_ name: String, _ text: String) throws {
            try text.write(toFile: dir + "/" + name, atomically: false, encoding: .utf8)
            XCTAssertEqual(chmod(dir + "/" + name, 0o600), 0)
        }
        try write("partner-feed", readmeCredentials)
        // Relative and absolute paths.
        try write("plain", "Client-Certificate: certs/plain.pem\nClient-Key: \(dir)/certs/plain.key\n")
        try write("wrong-pass", readmeCredentials.replacingOccurrences(of: String(passphrase), with: "not the passphrase"))
        try write("escape", "Client-Certificate: ../client.pem\n")

        try spool.drop("partner-feed", request.replacingOccurrences(of: "https://feeds.partner.example", with: nginx.url("", scheme: "https")))
        // One connection at a time: an item may only get a connection another item left.
        try spool.drop("rounds", """
            url: \(nginx.url("/daily/plain.csv", scheme: "https"))
            credentials: plain
            url: \(nginx.url("/daily/open.csv", scheme: "https"))
            url: \(nginx.url("/daily/again.csv", scheme: "https"))
            credentials: plain
            url: \(nginx.url("/daily/plain.csv", scheme: "https"))
            name: wrong-pass.csv
            credentials: wrong-pass
            url: \(nginx.url("/here", scheme: "https"))
            name: here.csv
            credentials: plain
            url: \(nginx.url("/away", scheme: "https"))
            name: away.csv
            credentials: plain
            url: \(nginx.url("/daily/plain.csv", scheme: "https"))
            name: escape.csv
            credentials: escape
            """)
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--credentials-dir", dir, "--ca-file", certs.caCertificate, "--concurrency", "1", "--per-host", "1", "--log-level", "debug"])
        let seconds = -started.timeIntervalSinceNow
        XCTAssertEqual(status, 1, stderr)

        for name in ["2026-12-05.csv", "plain.csv", "again.csv", "here.csv"] {
            XCTAssertEqual(try spool.read("final", name), Array("rows of \(name)\n".utf8), name)
        }
        let items = try XCTUnwrap(try json("failed", "rounds.error")["items"] as? [[String: Any]])
        let failed = Dictionary(uniqueKeysWithValues: items.map { ($0["index"] as? Int ?? -1, $0) })
        XCTAssertEqual(Set(failed.keys), [1, 3, 5, 6], "\(items)")
        XCTAssertEqual(failed[1]?["code"] as? String, "client-certificate")
        XCTAssertEqual(failed[1]?["message"] as? String,
                       "the server wants a client certificate and none was sent (HTTP 400: No required SSL certificate was sent)")
        XCTAssertEqual(failed[3]?["code"] as? String, "client-certificate")
        let wrongPass = failed[3]?["message"] as? String ?? ""
        XCTAssertTrue(wrongPass.hasPrefix("credentials 'wrong-pass': the client certificate or key could not be used"), wrongPass)
        XCTAssertEqual(failed[5]?["code"] as? String, "redirect-refused")
        XCTAssertEqual(failed[5]?["message"] as? String, "the server redirected to \(other.url("", scheme: "https")), another host: "
                       + "an item with a client certificate follows redirects on its own host only")
        XCTAssertEqual(failed[6]?["code"] as? String, "credentials")
        XCTAssertEqual(failed[6]?["message"] as? String,
                       "credentials 'escape': Client-Certificate must stay inside the credentials folder (no ..), or be an absolute path")
        for index in [1, 3, 5] { XCTAssertEqual(failed[index]?["attempts"] as? Int, 1, "permanent: \(failed[index] ?? [:])") }

        // B never heard of the item: nothing was sent there, with or without a certificate.
        XCTAssertEqual((try? String(contentsOfFile: logs + "/b.log", encoding: .utf8)) ?? "", "")
        // A: each certificate item's requests came with the client's name, the one without none —
        // on a connection of its own. With `--concurrency 1` libcurl keeps at most one connection
        // (`CURLMOPT_MAX_TOTAL_CONNECTIONS`, `CURLMOPT_MAXCONNECTS`): the certificate item's
        // connection sat idle in its cache when the item without one started, which could have
        // taken it and did not; opening its own closed that idle one, so the next certificate item
        // opened a third.
        let lines = try String(contentsOfFile: logs + "/a.log", encoding: .utf8).split(separator: "\n")
            .map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
        func entry(_ uri: String) -> [String]? { lines.first { $0.count == 4 && $0[2] == uri } }
        let plain = try XCTUnwrap(entry("/daily/plain.csv")), open = try XCTUnwrap(entry("/daily/open.csv"))
        let again = try XCTUnwrap(entry("/daily/again.csv"))
        XCTAssertEqual(plain[1], "CN=spoolfetch-client")
        XCTAssertEqual(again[1], "CN=spoolfetch-client")
        XCTAssertEqual(open[1], "-", "no certificate on the item without one (nginx logs an empty value as -)")
        XCTAssertEqual(open[3], "400")
        XCTAssertNotEqual(open[0], plain[0], "not the certificate item's connection")
        XCTAssertNotEqual(open[0], again[0])
        XCTAssertEqual(entry("/here")?[3], "302")
        XCTAssertEqual(entry("/daily/here.csv")?[1], "CN=spoolfetch-client", "a redirect on its own host is followed, with the certificate")
        XCTAssertEqual(entry("/away")?[3], "302")
        XCTAssertFalse(stderr.contains(String(passphrase)), "the log must not hold the passphrase")
        for file in SpoolFiles.all(under: spool.root) {
            let text = String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self)
            XCTAssertFalse(text.contains(String(passphrase)), "\(file) must not hold the passphrase")
        }
        print("mTLS round: \(lines.count) requests to nginx (ssl_verify_client on), 4 files published, "
              + "4 refusals, drain \(String(format: "%.1f", seconds)) s")
    }

    /// A server that refuses in the TLS 1.3 handshake (`openssl s_server -Verify 1`: alert 116,
    /// "certificate required") rather than with nginx's 400: the same `client-certificate`, and
    /// not taken for an outage although no response byte came.
    func testAHandshakeAlertForAMissingCertificateFailsWithClientCertificate() throws {
        let certs = try TestCertificates(in: scratch)
        let server = try HandshakeServer(certs)
        defer { server.stop() }
        let dir = scratch + "/credentials"
        try makeClient(certs, certificate: dir + "/certs/c.pem", key: dir + "/certs/c.key", passphrase: nil)
        try "Client-Certificate: certs/c.pem\nClient-Key: certs/c.key\n".write(toFile: dir + "/c", atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(dir + "/c", 0o600), 0)
        try spool.drop("alert", """
            url: https://127.0.0.1:\(server.port)/
            name: without.html
            url: https://127.0.0.1:\(server.port)/
            name: with.html
            credentials: c
            """)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: [
            "--credentials-dir", dir, "--ca-file", certs.caCertificate, "--concurrency", "1"])
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(String(decoding: try spool.read("final", "with.html"), as: UTF8.self).contains("CN=spoolfetch-client"),
                      "s_server's page names the client certificate it got")
        let items = try XCTUnwrap(try json("failed", "alert.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(items.first?["code"] as? String, "client-certificate")
        XCTAssertEqual(items.first?["attempts"] as? Int, 1, "permanent, and not an outage")
        let message = items.first?["message"] as? String ?? ""
        XCTAssertTrue(message.hasPrefix("the server wants a client certificate and none was sent (")
                      && message.contains("alert certificate required"), message)
    }

    /// The README's request block of "Client certificates" (the one naming `partner-feed`).
    static func readmeRequest() throws -> String {
        let block = try ReadmeExample.block(startingWith: "# a request", containing: "credentials: partner-feed")
        XCTAssertTrue(block.contains("https://feeds.partner.example/"))
        return block
    }
}

/// `openssl s_server -Verify 1 -www` on 127.0.0.1: wants a client certificate of the test CA, and
/// answers each request with a page describing the TLS session (the client's certificate
/// included). Ready when it prints `ACCEPT 127.0.0.1:PORT`.
private final class HandshakeServer {
    let port: Int
    private let process = Process()

    init(_ certs: TestCertificates) throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:0", "-cert", certs.serverCertificate, "-key", certs.serverKey,
                             "-CAfile", certs.caCertificate, "-Verify", "1", "-tls1_3", "-www"]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let ready = DispatchSemaphore(value: 0)
        let found = FoundPort()
        Thread.detachNewThread {
            var text = ""
            while true {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT ") }),
                   let port = line.split(separator: ":").last.flatMap({ Int($0) }) {
                    found.port = port
                    break
                }
            }
            ready.signal()
            // Keep reading, so that s_server never blocks on a full pipe.
            while !output.fileHandleForReading.availableData.isEmpty {}
        }
        guard ready.wait(timeout: .now() + 20) == .success, let port = found.port else {
            process.terminate()
            throw WaitError.timedOut(what: "openssl s_server to print ACCEPT", after: 20)
        }
        self.port = port
    }

    func stop() {
        if process.isRunning { process.terminate(); process.waitUntilExit() }
    }
}

private final class FoundPort: @unchecked Sendable { var port: Int? }
