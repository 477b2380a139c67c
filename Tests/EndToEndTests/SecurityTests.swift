import Foundation
import SpoolTestSupport
import XCTest

/// Every request file is hostile: nothing escapes the spool, nothing leaks, every refusal says why.
final class SecurityTests: SpoolTestCase {
    /// A second host:port, the target of a cross-host redirect.
    var other: TestHTTPServer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        other = try TestHTTPServer.start()
    }

    override func tearDownWithError() throws {
        try other.shutdown()
        try super.tearDownWithError()
    }

    func testHostileRequestsAreRefusedWithReasonsWhileTheGoodOneIsPublished() throws {
        let secretAuth = "Bearer SECRET-AUTH-81f3"
        let secretCookie = "session=SECRET-COOKIE-27c9"
        let outside = try makeOutsideFile("keep me")
        server.serve("/ok", body: Array("ok".utf8))
        server.serve("/to-file", body: [], script: [.redirect(to: "file:///etc/passwd")])
        server.serve("/to-ftp", body: [], script: [.redirect(to: "ftp://127.0.0.1/x")])
        server.serve("/to-gopher", body: [], script: [.redirect(to: "gopher://127.0.0.1/x")])
        server.serve("/to-dict", body: [], script: [.redirect(to: "dict://127.0.0.1/x")])
        server.serve("/loop", body: [], script: [.redirect(to: "/loop")])
        server.serve("/chunky", body: TestBody.random(count: 100_000, seed: 1), script: [.chunked])
        server.serve("/huge", body: TestBody.random(count: 300_000, seed: 2))
        server.serve("/planted", body: Array("new data".utf8))
        // The good request: credentials, redirected to another host:port.
        server.serve("/private", body: [], script: [.redirect(to: other.url("/public"))])
        other.serve("/public", body: Array("good".utf8))

        let u = server.url
        let rejectedCases: [(String, String, String)] = [
            ("scheme-ftp", "ftp://127.0.0.1/x\n", "bad-scheme"),
            ("scheme-file", "url: file:///etc/passwd\n", "bad-scheme"),
            ("scheme-gopher", "gopher://127.0.0.1/x\n", "bad-scheme"),
            ("scheme-js", "url: javascript://alert(1)\n", "bad-scheme"),
            ("userinfo", "url: http://user:pw@127.0.0.1/x\n", "bad-url"),
            ("url-space", "url: \(u("/a b"))\n", "bad-url"),
            ("url-nul", "url: \(u("/a"))\u{0}b\n", "bad-url"),
            ("name-dotdot", "url: \(u("/ok"))\nname: ../../escape\n", "bad-name"),
            ("name-absolute", "url: \(u("/ok"))\nname: /etc/passwd\n", "bad-name"),
            ("name-hidden", "url: \(u("/ok"))\nname: .bashrc\n", "bad-name"),
            ("name-control", "url: \(u("/ok"))\nname: a\u{1B}[31mb\n", "bad-name"),
            ("name-long", "url: \(u("/ok"))\nname: \(String(repeating: "x", count: 256))\n", "bad-name"),
            ("name-marker", "url: \(u("/ok"))\nname: fake.done\n", "bad-name"),
            ("header-cr", "url: \(u("/ok"))\nheader: X-A: 1\rX-Injected: 2\n", "bad-header"),
            ("header-range", "url: \(u("/ok"))\nheader: Range: bytes=0-\n", "bad-header"),
            ("unknown-key", "url: \(u("/ok"))\nouptut: /tmp/x\n", "unknown-key"),
            ("group-escape", "group: ../up\nurl: \(u("/ok"))\n", "bad-group"),
            ("duplicate", "url: \(u("/ok"))\nname: a\nname: b\n", "duplicate-key"),
            ("no-url", "name: x\n", "no-items"),
            ("bad-digest", "url: \(u("/ok"))\nsha256: zz\n", "bad-sha256"),
            ("too-many", (0..<6).map { u("/ok?\($0)") }.joined(separator: "\n") + "\n", "too-many-items"),
            ("too-large", "# " + String(repeating: "x", count: 70_000) + "\n" + u("/ok") + "\n", "too-large"),
        ]
        let failedCases: [(String, String, String)] = [
            ("redirect-file", "url: \(u("/to-file"))\n", "unsupported-protocol"),
            ("redirect-ftp", "url: \(u("/to-ftp"))\n", "unsupported-protocol"),
            ("redirect-gopher", "url: \(u("/to-gopher"))\n", "unsupported-protocol"),
            ("redirect-dict", "url: \(u("/to-dict"))\n", "unsupported-protocol"),
            ("redirect-loop", "url: \(u("/loop"))\n", "too-many-redirects"),
            ("chunked-over-max", "url: \(u("/chunky"))\nmax-bytes: 10k\n", "too-large"),
            ("over-daemon-max", "url: \(u("/huge"))\n", "too-large"),
            ("digest-mismatch", "url: \(u("/ok"))\nname: ok2\nsha256: \(String(repeating: "0", count: 64))\n", "sha256-mismatch"),
        ]
        for (name, text, _) in rejectedCases + failedCases { try spool.drop(name, text) }
        // Not UTF-8, written as bytes.
        try Data([0x68, 0x74, 0x74, 0x70, 0xFF, 0xFE, 0x0A]).write(to: URL(fileURLWithPath: spool.path("tmp", "binary")))
        XCTAssertEqual(rename(spool.path("tmp", "binary"), spool.path("incoming", "binary")), 0)
        // A symlink dropped as a request: never opened.
        XCTAssertEqual(symlink(outside, spool.path("tmp", "link")), 0)
        XCTAssertEqual(rename(spool.path("tmp", "link"), spool.path("incoming", "link")), 0)
        // A symlink planted in the final folder where a file will be published.
        try FileManager.default.createDirectory(atPath: spool.path("final"), withIntermediateDirectories: true)
        XCTAssertEqual(symlink(outside, spool.path("final", "planted.txt")), 0)
        try spool.drop("planted", "url: \(u("/planted"))\nname: planted.txt\n")
        try spool.drop("good", """
            header: Authorization: \(secretAuth)
            header: Cookie: \(secretCookie)
            url: \(u("/private"))
            name: good.txt
            """)

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--max-items", "5", "--max-bytes", "200k", "--max-request-bytes", "64k",
                                                                                  "--log-level", "debug"])
        XCTAssertEqual(status, 1)

        for (name, _, code) in rejectedCases + [("binary", "", "not-utf8"), ("link", "", "symlink")] {
            XCTAssertTrue(spool.files(in: "rejected").contains(name), "\(name) must be rejected")
            let error = try json("rejected", name + ".error")
            XCTAssertEqual(error["code"] as? String, code, name)
            XCTAssertFalse((error["message"] as? String ?? "").isEmpty, name)
        }
        XCTAssertEqual(try json("rejected", "unknown-key.error")["line"] as? Int, 2)
        for (name, _, code) in failedCases {
            XCTAssertTrue(spool.files(in: "failed").contains(name), "\(name) must fail")
            let items = try XCTUnwrap(try json("failed", name + ".error")["items"] as? [[String: Any]], name)
            XCTAssertEqual(items.first?["code"] as? String, code, name)
        }
        XCTAssertEqual(rejectedCases.count + failedCases.count + 2, 32, "at least 25 hostile requests")

        // The good one, and the planted symlink never written through.
        XCTAssertEqual(try spool.read("final", "good.txt"), Array("good".utf8), stderr)
        XCTAssertEqual(try String(contentsOfFile: outside, encoding: .utf8), "keep me")
        XCTAssertEqual(try spool.read("final", "planted-1.txt"), Array("new data".utf8))
        XCTAssertEqual(try json("final", "planted-1.txt.done")["name"] as? String, "planted-1.txt")

        // Credentials went to their own host only.
        XCTAssertEqual(server.requests(for: "/private").first?.header("Authorization"), secretAuth)
        XCTAssertNil(other.requests(for: "/public").first?.header("Authorization"), "no Authorization to another host")
        XCTAssertNil(other.requests(for: "/public").first?.header("Cookie"), "no Cookie to another host")
        // Nothing the daemon wrote holds a secret (the producers' own request files are kept as written).
        let requestFiles = Set(rejectedCases.map(\.0) + failedCases.map(\.0) + ["binary", "link", "planted", "good"])
        for secret in ["SECRET-AUTH-81f3", "SECRET-COOKIE-27c9"] {
            XCTAssertFalse(stderr.contains(secret), "the log must not contain \(secret)")
            for file in allFiles(under: spool.root) where !requestFiles.contains((file as NSString).lastPathComponent) {
                let content = (try? Data(contentsOf: URL(fileURLWithPath: file))).map { String(decoding: $0, as: UTF8.self) } ?? ""
                XCTAssertFalse(content.contains(secret), "\(file) must not contain \(secret)")
            }
        }
        // Nothing was created outside the spool.
        let parent = (outside as NSString).deletingLastPathComponent
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent), ["outside.txt"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.root + "/../escape"))
        for folder in ["incoming", "active", "staging"] { XCTAssertEqual(spool.leftovers(in: folder), [], folder) }
    }

    func testTLSIsVerifiedAndCaFileAddsTrust() throws {
        let certDir = spool.path("tmp", "certs")
        try FileManager.default.createDirectory(atPath: certDir, withIntermediateDirectories: true)
        let certs = try TestCertificates(in: certDir)
        let www = spool.path("tmp", "www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        try Data("secure".utf8).write(to: URL(fileURLWithPath: www + "/s.txt"))
        let nginx = try NginxServer(root: www, certificate: certs.serverCertificate, key: certs.serverKey)

        try spool.drop("untrusted", nginx.url("/s.txt", scheme: "https") + "\n")
        let (refused, _) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(refused, 1, "an unknown CA is refused")
        let items = try XCTUnwrap(try json("failed", "untrusted.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.first?["code"] as? String, "tls")
        XCTAssertEqual(items.first?["attempts"] as? Int, 1, "a TLS verification failure is permanent")

        try spool.drop("trusted", nginx.url("/s.txt", scheme: "https") + "\n")
        let (accepted, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--ca-file", certs.caCertificate])
        XCTAssertEqual(accepted, 0, stderr)
        XCTAssertEqual(try spool.read("final", "s.txt"), Array("secure".utf8))
    }

    func testNoFlagTurnsTLSVerificationOff() throws {
        for flag in ["--insecure", "-k", "--no-verify", "--tls-no-verify"] {
            let p = try DaemonProcess.launch(["run", "--once", "--spool", spool.root, flag])
            XCTAssertNotEqual(try p.waitForExit(timeout: 30), 0, "\(flag) must not exist")
        }
    }

    private func makeOutsideFile(_ text: String) throws -> String {
        let dir = spool.root + "-outside"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/outside.txt"
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    private func allFiles(under root: String) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: root) else { return [] }
        return e.compactMap { $0 as? String }.map { root + "/" + $0 }.filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDir) && !isDir.boolValue
        }
    }
}
