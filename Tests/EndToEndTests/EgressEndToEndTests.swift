import Foundation
import SpoolTestSupport
import XCTest

/// `--deny-network` / `--allow-network`, checked on the address of every connection: a redirect, a
/// DNS name (a hosts file bind-mounted in a mount namespace of the daemon's own), numeric spellings
/// of an address, the metadata address (inside a network namespace with only `lo`, so a failed
/// check reaches nothing), and a proxy (whose own address is what is checked). Every server is on
/// a loopback address or inside the test's namespace; each denial is checked against a server that
/// would have answered, and counted at its listening socket: it must see no connection at all.
final class EgressEndToEndTests: SpoolTestCase {
    /// A second server, on 127.0.0.2: the "internal service" a request must not reach.
    private var inside: TestHTTPServer!
    private let secret = Array("internal only".utf8)

    override func setUpWithError() throws {
        try super.setUpWithError()
        inside = try TestHTTPServer.start(host: "127.0.0.2")
        inside.serve("/x", body: secret)
    }

    override func tearDownWithError() throws {
        try inside?.shutdown()
        inside = nil
        try super.tearDownWithError()
    }

    /// The request's only failed item, from `failed/R.error`.
    private func failedItem(_ request: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let record = try json("failed", request + ".error", file: file, line: line)
        return try XCTUnwrap((record["items"] as? [[String: Any]])?.first, "\(record)", file: file, line: line)
    }

    func testARedirectToADeniedAddressFailsAtOnceAndItsServerSeesNothing() throws {
        server.serve("/r", body: [], script: [.redirect(to: inside.url("/x?signature=s3cr3t"))])
        // Today's answer first: without the policy the redirect is followed and the body published.
        try spool.drop("open", "url: \(server.url("/r"))\nname: open\n")
        XCTAssertEqual(try DaemonProcess.drain(spool: spool.root).status, 0)
        XCTAssertEqual(try spool.read("final", "open"), secret)
        let before = inside.connectionCount
        XCTAssertEqual(before, 1)

        try spool.drop("redirect", "url: \(server.url("/r"))\nname: r\n")
        let run = try DaemonProcess.drain(spool: spool.root, extra: ["--deny-network", "127.0.0.2/32", "--retry-base", "0.05"])
        XCTAssertEqual(run.status, 1, run.stderr)
        let item = try failedItem("redirect")
        XCTAssertEqual(item["code"] as? String, "address-denied", "\(item)")
        XCTAssertEqual(item["attempts"] as? Int, 1, "a denied address is not tried again: \(item)")
        let message = item["message"] as? String ?? ""
        XCTAssertTrue(message.contains("connecting to 127.0.0.2 at 127.0.0.2:\(inside.port) for http://127.0.0.2:\(inside.port)/x is denied by the egress policy (127.0.0.2/32 is in --deny-network"),
                      message)
        XCTAssertFalse(message.contains("s3cr3t"), "the URL is named without its query: \(message)")
        XCTAssertEqual(inside.connectionCount, before, "the denied server saw no connection")
        XCTAssertEqual(server.requests(for: "/r").count, 2, "the first server was asked (once per run)")
        XCTAssertFalse(spool.files(in: "final").contains("r"), "nothing published")
        XCTAssertFalse(run.stderr.contains("host unreachable"), "a denied address is not an outage: \(run.stderr)")
    }

    func testADNSNameThatResolvesToADeniedAddressIsRefused() throws {
        // /etc/hosts of the daemon's own mount namespace maps evil.test to 127.0.0.2 (libcurl
        // resolves through getaddrinfo, and so nsswitch's `files`).
        let scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-hosts")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let hosts = scratch + "/hosts"
        try "127.0.0.1 localhost\n127.0.0.2 evil.test\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        func drain(_ extra: [String]) throws -> (status: Int32, stderr: String) {
            let daemon = try DaemonProcess.launch(["--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                                                   "mount --bind \"$0\" /etc/hosts && exec \"$@\"", hosts,
                                                   DaemonProcess.executablePath, "run", "--once", "--spool", spool.root] + extra,
                                                  executable: "/usr/bin/unshare")
            return (try daemon.waitForExit(timeout: 60), daemon.stderrText)
        }
        let url = "http://evil.test:\(inside.port)/x"
        // The name resolves there (and only there): allowed, it is fetched from 127.0.0.2.
        try spool.drop("allowed", "url: \(url)\nname: allowed\n")
        XCTAssertEqual(try drain([]).status, 0)
        XCTAssertEqual(try spool.read("final", "allowed"), secret)
        let before = inside.connectionCount
        XCTAssertEqual(before, 1)

        try spool.drop("evil", "url: \(url)\nname: evil\n")
        // This time through the config file's key of the same name.
        let config = scratch + "/spoolfetch.conf"
        try "deny-network = \"default, 127.0.0.2/32\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        let run = try drain(["--config", config])
        XCTAssertEqual(run.status, 1, run.stderr)
        let item = try failedItem("evil")
        XCTAssertEqual(item["code"] as? String, "address-denied", "\(item)")
        XCTAssertEqual(item["attempts"] as? Int, 1, "\(item)")
        let message = item["message"] as? String ?? ""
        XCTAssertTrue(message.contains("connecting to evil.test at 127.0.0.2:\(inside.port) for \(url) is denied"), message)
        XCTAssertEqual(inside.connectionCount, before, "the denied server saw no connection")
        XCTAssertFalse(spool.files(in: "final").contains("evil"))
    }

    func testAllowWinsOverDenyAndNumericSpellingsAreJudgedByTheAddressTheyBecome() throws {
        server.serve("/a", body: Array("a".utf8))
        server.serve("/b", body: Array("b".utf8))
        let p = inside.port, q = server.port
        try spool.drop("spellings", """
            url: http://127.0.0.2:\(p)/x
            name: allowed
            url: http://0x7f000002:\(p)/x
            name: allowed-hex
            url: http://127.1:\(q)/a
            name: short
            url: http://0x7f000001:\(q)/b
            name: hex
            url: http://2130706433:\(q)/b
            name: decimal

            """)
        let run = try DaemonProcess.drain(spool: spool.root, extra: ["--deny-network", "127.0.0.0/8",
                                                                     "--allow-network", "127.0.0.2/32"])
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertEqual(try spool.read("final", "allowed"), secret, "allow wins where both match")
        XCTAssertEqual(try spool.read("final", "allowed-hex"), secret)
        let record = try json("failed", "spellings.error")
        let items = try XCTUnwrap(record["items"] as? [[String: Any]], "\(record)")
        XCTAssertEqual(Set(items.compactMap { $0["name"] as? String }), ["short", "hex", "decimal"], "\(items)")
        for item in items {
            XCTAssertEqual(item["code"] as? String, "address-denied", "\(item)")
            XCTAssertEqual(item["attempts"] as? Int, 1, "\(item)")
            let message = item["message"] as? String ?? ""
            XCTAssertTrue(message.contains("at 127.0.0.1:\(q) ") && message.contains("127.0.0.0/8 is in --deny-network"), message)
        }
        XCTAssertEqual(server.allRequests.count, 0, "no spelling of 127.0.0.1 reached its server")
        XCTAssertEqual(server.connectionCount, 0)
    }

    func testThroughAProxyTheProxysAddressIsWhatIsChecked() throws {
        let squid = try SquidProxy()
        // squid's first port refuses only CONNECT: a plain-http request through it is forwarded.
        let proxy = squid.url(port: squid.forbiddingPort)
        let environment = ["http_proxy": proxy, "HTTP_PROXY": proxy, "no_proxy": "", "NO_PROXY": ""]
        // The proxy's address denied: the item fails naming the proxy; the origin is never asked.
        server.serve("/p", body: Array("proxied".utf8))
        try spool.drop("to-proxy", "url: \(server.url("/p"))\nname: p\n")
        let denied = try DaemonProcess.launch(["run", "--once", "--spool", spool.root, "--deny-network", "127.0.0.1/32"],
                                              environment: environment)
        XCTAssertEqual(try denied.waitForExit(timeout: 60), 1, denied.stderrText)
        let item = try failedItem("to-proxy")
        XCTAssertEqual(item["code"] as? String, "address-denied", "\(item)")
        XCTAssertEqual(item["attempts"] as? Int, 1, "\(item)")
        let message = item["message"] as? String ?? ""
        XCTAssertTrue(message.contains("connecting to the proxy \(proxy) at 127.0.0.1:\(squid.forbiddingPort) for \(server.url("/p")) is denied"),
                      message)
        XCTAssertEqual(server.connectionCount, 0)
        XCTAssertFalse(denied.stderrText.contains("unreachable"), "a denied proxy is not a proxy that is down: \(denied.stderrText)")

        // The proxy allowed: it decides. An origin whose own address is denied is fetched through it.
        try spool.drop("via-proxy", "url: \(inside.url("/x"))\nname: via\n")
        let allowed = try DaemonProcess.launch(["run", "--once", "--spool", spool.root, "--deny-network", "127.0.0.2/32"],
                                               environment: environment)
        XCTAssertEqual(try allowed.waitForExit(timeout: 60), 0, allowed.stderrText)
        XCTAssertEqual(try spool.read("final", "via"), secret)
        XCTAssertEqual(inside.requests(for: "/x").count, 1, "squid, not the daemon, connected to the origin")
    }

    func testADeniedSourceMovesOnToTheItemsNextMirror() throws {
        server.serve("/m", body: Array("public copy".utf8))
        try spool.drop("mirrored", "url: \(inside.url("/x"))\nmirror: \(server.url("/m"))\nname: m\n")
        let run = try DaemonProcess.drain(spool: spool.root, extra: ["--deny-network", "127.0.0.2/32"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try spool.read("final", "m"), Array("public copy".utf8))
        XCTAssertEqual(inside.connectionCount, 0, "the denied source saw no connection")
        XCTAssertEqual(server.requests(for: "/m").count, 1)
    }

    func testAnUploadToADeniedAddressSendsNothing() throws {
        try FileManager.default.createDirectory(atPath: spool.path("outgoing"), withIntermediateDirectories: true)
        let temp = spool.path("tmp", ".report.csv")
        try Data("a,b\n".utf8).write(to: URL(fileURLWithPath: temp))
        XCTAssertEqual(rename(temp, spool.path("outgoing", "report.csv")), 0)
        inside.acceptUploads("/in", status: 201)
        try spool.drop("exfiltrate", "url: \(inside.url("/in"))\nupload: report.csv\n")
        let run = try DaemonProcess.drain(spool: spool.root, extra: ["--deny-network", "127.0.0.2/32"])
        XCTAssertEqual(run.status, 1, run.stderr)
        let item = try failedItem("exfiltrate")
        XCTAssertEqual(item["code"] as? String, "address-denied", "\(item)")
        XCTAssertEqual(item["attempts"] as? Int, 1, "\(item)")
        XCTAssertEqual(inside.connectionCount, 0)
        XCTAssertEqual(inside.uploadBytesReceived, 0)
    }

    func testABadNetworkIsRefusedAtStartNamingIt() throws {
        for (flag, value) in [("--deny-network", "10.0.0.1/8"), ("--allow-network", "10.0.0.0/33"), ("--deny-network", "default,intranet")] {
            let run = try DaemonProcess.drain(spool: spool.root, extra: [flag, value])
            XCTAssertEqual(run.status, 64, run.stderr)
            XCTAssertTrue(run.stderr.contains("\(flag) '") && run.stderr.contains("is not a network"), run.stderr)
        }
        let scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-conf")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let config = scratch + "/spoolfetch.conf"
        try "deny-network = \"169.254.0.0/16, 192.168.1.1/16\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        let run = try DaemonProcess.drain(spool: spool.root, extra: ["--config", config])
        XCTAssertEqual(run.status, 3, run.stderr)
        XCTAssertTrue(run.stderr.contains("'192.168.1.1/16' is not a network: it has bits set past its /16 prefix (the network is 192.168.0.0/16"),
                      run.stderr)
    }
}

/// The default policy inside a network namespace the test makes, with only `lo` and the
/// metadata address on it (as IPv4, and as a NAT64 gateway's DNS64 answer spells it): a request
/// for the metadata service is refused with default settings, and the listener there sees no
/// connection (a failing check would reach only it).
final class MetadataAddressTests: SpoolTestCase {
    private var namespace = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        namespace = "sf-egress-\(getpid())-\(UInt16.random(in: 0...UInt16.max))"
        try ip(["netns", "add", namespace])
        do {
            try ip(["-n", namespace, "link", "set", "lo", "up"])
            try ip(["-n", namespace, "addr", "add", "169.254.169.254/32", "dev", "lo"])
            try ip(["-n", namespace, "-6", "addr", "add", "64:ff9b::a9fe:a9fe/128", "dev", "lo", "nodad"])
        } catch {
            try? ip(["netns", "del", namespace])     // a setUp that throws may get no tearDown
            throw error
        }
    }

    override func tearDownWithError() throws {
        try? ip(["netns", "del", namespace])
        try super.tearDownWithError()
    }

    func testTheMetadataAddressIsDeniedByDefault() throws {
        try checkDeniedByDefault(address: "169.254.169.254", network: "169.254.0.0/16")
    }

    /// 169.254.169.254 behind a NAT64 gateway: `64:ff9b::a9fe:a9fe`, which the default lists too.
    func testTheMetadataAddressBehindNAT64IsDeniedByDefault() throws {
        try checkDeniedByDefault(address: "64:ff9b::a9fe:a9fe", network: "64:ff9b::a9fe:a9fe/128")
    }

    /// A listener on `address` in the namespace; a request for it with default settings fails
    /// `address-denied` naming `network`, the listener sees nothing; allowed, it is fetched.
    private func checkDeniedByDefault(address: String, network: String) throws {
        let ipv6 = address.contains(":")
        let host = ipv6 ? "[\(address)]" : address
        let dir = try TempSpool.makeScratchFolder(prefix: "spoolfetch-metadata")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A metadata service stand-in: counts each accepted connection in a file before it answers.
        let script = """
            import socket, sys
            d = sys.argv[1]
            s = socket.socket(socket.AF_INET6 if ":" in sys.argv[2] else socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((sys.argv[2], 80))
            s.listen(16)
            open(d + "/ready", "w").close()
            while True:
                c, _ = s.accept()
                with open(d + "/connections", "a") as f:
                    f.write("connection\\n")
                data = b""
                while b"\\r\\n\\r\\n" not in data:
                    got = c.recv(4096)
                    if not got:
                        break
                    data += got
                c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 14\\r\\nConnection: close\\r\\n\\r\\nrole-and-token")
                c.close()
            """
        try script.write(toFile: dir + "/metadata.py", atomically: true, encoding: .utf8)
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        listener.arguments = ["netns", "exec", namespace, "/usr/bin/python3", dir + "/metadata.py", dir, address]
        listener.standardOutput = FileHandle.nullDevice
        listener.standardError = FileHandle.nullDevice
        try listener.run()
        defer { listener.terminate(); listener.waitUntilExit() }
        try DirectoryWaiter.waitForFile("ready", in: dir, timeout: 20)
        func connections() -> Int {
            ((try? String(contentsOfFile: dir + "/connections", encoding: .utf8)) ?? "").split(separator: "\n").count
        }

        try spool.drop("metadata", "url: http://\(host)/latest/meta-data\nname: meta\n")
        let denied = try DaemonProcess.launch(inNetworkNamespace: namespace, ["run", "--once", "--spool", spool.root])
        XCTAssertEqual(try denied.waitForExit(timeout: 60), 1, denied.stderrText)
        let record = try json("failed", "metadata.error")
        let item = try XCTUnwrap((record["items"] as? [[String: Any]])?.first, "\(record)")
        XCTAssertEqual(item["code"] as? String, "address-denied", "\(item)")
        XCTAssertEqual(item["attempts"] as? Int, 1, "\(item)")
        let message = item["message"] as? String ?? ""
        XCTAssertTrue(message.contains("connecting to \(host) at \(host):80 for http://\(host)/latest/meta-data is denied by the egress policy (\(network) is in --deny-network"),
                      message)
        XCTAssertEqual(connections(), 0, "the metadata listener saw no connection")
        XCTAssertFalse(denied.stderrText.contains("host unreachable"), denied.stderrText)

        // The listener answers whoever reaches it: allowed explicitly, the same request is fetched.
        try spool.drop("metadata-allowed", "url: http://\(host)/latest/meta-data\nname: meta\n")
        let allowed = try DaemonProcess.launch(inNetworkNamespace: namespace, ["run", "--once", "--spool", spool.root,
                                                                              "--allow-network", ipv6 ? "\(address)/128" : "\(address)/32"])
        XCTAssertEqual(try allowed.waitForExit(timeout: 60), 0, allowed.stderrText)
        XCTAssertEqual(try spool.read("final", "meta"), Array("role-and-token".utf8))
        XCTAssertEqual(connections(), 1)
    }

    private func ip(_ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        p.arguments = arguments
        let err = Pipe()
        p.standardError = err
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw NSError(domain: "ip", code: Int(p.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "ip \(arguments.joined(separator: " ")): \(text)"])
        }
    }
}
