import Foundation
import SpoolTestSupport
import XCTest

/// Without `--ca-file` or `--ca-path` the daemon trusts the system's store as its bundle
/// (`/etc/ssl/certs/ca-certificates.crt`, which `update-ca-certificates` writes), parsed once
/// for the session instead of at every new TLS connection. Each test mounts a store of its own
/// over `/etc/ssl/certs` in a mount namespace: a copy of the machine's, with the test's CA added
/// to the bundle, to the directory only, or to neither.
final class SystemTrustTests: SpoolTestCase {
    private var certs: TestCertificates!
    private var nginx: NginxServer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        let certDir = spool.path("tmp", "certs")
        try FileManager.default.createDirectory(atPath: certDir, withIntermediateDirectories: true)
        certs = try TestCertificates(in: certDir)
        let www = spool.path("tmp", "www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        for i in 0 ..< 3 { try Data("secure \(i)".utf8).write(to: URL(fileURLWithPath: www + "/s\(i).txt")) }
        // A new connection per request: every item makes the daemon verify a chain again.
        nginx = try NginxServer(root: www, certificate: certs.serverCertificate, key: certs.serverKey,
                                serverDirectives: "keepalive_requests 1;")
    }

    /// XCTest keeps each test case object until the whole run ends: the server goes with the test.
    override func tearDownWithError() throws {
        nginx = nil
        try super.tearDownWithError()
    }

    /// A copy of the machine's `/etc/ssl/certs` with the test's CA in its bundle, its directory
    /// (a hash link, as `c_rehash` makes), both or neither.
    private func store(bundle: Bool, directory: Bool) throws -> String {
        let dir = spool.path("tmp", "store-\(bundle)-\(directory)")
        let copy = Process()
        copy.executableURL = URL(fileURLWithPath: "/bin/cp")
        copy.arguments = ["-a", "/etc/ssl/certs", dir]
        try copy.run()
        copy.waitUntilExit()
        XCTAssertEqual(copy.terminationStatus, 0, "cp -a /etc/ssl/certs")
        let ca = try String(contentsOfFile: certs.caCertificate, encoding: .utf8)
        if bundle {
            let handle = try XCTUnwrap(FileHandle(forWritingAtPath: dir + "/ca-certificates.crt"))
            handle.seekToEndOfFile()
            handle.write(Data(("\n" + ca).utf8))
            try handle.close()
        }
        if directory {
            try ca.write(toFile: dir + "/spoolfetch-test-ca.pem", atomically: true, encoding: .utf8)
            let hash = Process()
            hash.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            hash.arguments = ["x509", "-hash", "-noout", "-in", certs.caCertificate]
            let out = Pipe()
            hash.standardOutput = out
            try hash.run()
            hash.waitUntilExit()
            let name = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            try FileManager.default.createSymbolicLink(atPath: dir + "/\(name).0", withDestinationPath: "spoolfetch-test-ca.pem")
        }
        return dir
    }

    private func drain(_ name: String, store: String, extra: [String] = []) throws -> (status: Int32, stderr: String) {
        try spool.drop(name, (0 ..< 3).map { nginx.url("/s\($0).txt", scheme: "https") }.joined(separator: "\n") + "\n")
        let daemon = try DaemonProcess.launch(trustStore: store, ["run", "--once", "--spool", spool.root] + extra)
        let status = try daemon.waitForExit(timeout: 60)
        return (status, daemon.stderrText)
    }

    private func failedCodes(_ name: String) throws -> [String] {
        let record = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try spool.read("failed", name + ".error"))) as? [String: Any])
        return (record["items"] as? [[String: Any]] ?? []).compactMap { $0["code"] as? String }
    }

    func testACAInTheSystemBundleIsTrustedOverManyNewConnections() throws {
        let (status, stderr) = try drain("bundle", store: try store(bundle: true, directory: true))
        XCTAssertEqual(status, 0, stderr)
        for i in 0 ..< 3 { XCTAssertEqual(try spool.read("final", "s\(i).txt"), Array("secure \(i)".utf8)) }
        XCTAssertEqual(Set(nginx.requestLog().map(\.connection)).count, 3, "three requests, each on a new connection")
    }

    func testACAInNeitherIsRefusedAndOneInTheDirectoryOnlyNeedsCaPath() throws {
        let (refused, _) = try drain("neither", store: try store(bundle: false, directory: false))
        XCTAssertEqual(refused, 1, "an unknown CA is refused")
        XCTAssertEqual(try failedCodes("neither"), ["tls", "tls", "tls"])

        let directoryOnly = try store(bundle: false, directory: true)
        let (bundleOnly, _) = try drain("directory", store: directoryOnly)
        XCTAssertEqual(bundleOnly, 1, "the system store is its bundle: a CA linked into the directory alone is not in it")
        XCTAssertEqual(try failedCodes("directory"), ["tls", "tls", "tls"])

        let (withPath, stderr) = try drain("with-path", store: directoryOnly, extra: ["--ca-path", "/etc/ssl/certs"])
        XCTAssertEqual(withPath, 0, "--ca-path /etc/ssl/certs trusts the directory as well: \(stderr)")
        for i in 0 ..< 3 { XCTAssertEqual(try spool.read("final", "s\(i).txt"), Array("secure \(i)".utf8)) }
    }
}
