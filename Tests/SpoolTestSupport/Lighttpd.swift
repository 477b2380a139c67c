import Foundation

/// lighttpd on 127.0.0.1 over TLS with HTTP/2 (ALPN `h2`), started by a test: a real server that
/// allows few streams per HTTP/2 connection (lighttpd 1.4 announces
/// `SETTINGS_MAX_CONCURRENT_STREAMS` 8), so a client that wants more requests at once must open
/// more connections. Each request is logged with the client's port (`%{remote}p`): one port is
/// one connection. Stopped in deinit.
public final class LighttpdServer: @unchecked Sendable {
    public let port: Int
    public let root: String
    private let process: Process
    private let workDir: String

    public init(root: String, certificate: String, key: String) throws {
        let lighttpd = "/usr/sbin/lighttpd"
        guard FileManager.default.isExecutableFile(atPath: lighttpd) else {
            throw WaitError.timedOut(what: "lighttpd at \(lighttpd) (install lighttpd and lighttpd-mod-openssl; `make test` does)",
                                     after: 0)
        }
        workDir = try makeTempDirectory(prefix: "spoolfetch-lighttpd")
        self.root = root
        port = try NginxServer.freePort()
        let config = """
            server.document-root = "\(root)"
            server.bind = "127.0.0.1"
            server.port = \(port)
            server.pid-file = "\(workDir)/lighttpd.pid"
            server.errorlog = "\(workDir)/error.log"
            server.modules = ("mod_openssl", "mod_accesslog")
            server.feature-flags = ("server.h2proto" => "enable")
            ssl.engine = "enable"
            ssl.pemfile = "\(certificate)"
            ssl.privkey = "\(key)"
            accesslog.filename = "\(workDir)/access.log"
            accesslog.format = "%{remote}p %H %s %b"
            """
        try config.write(toFile: workDir + "/lighttpd.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: lighttpd)
        process.arguments = ["-D", "-f", workDir + "/lighttpd.conf"]
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        // lighttpd writes its pid file once its listening socket is open.
        try DirectoryWaiter.wait(in: workDir, timeout: 10, what: "lighttpd to start (its pid file)") {
            FileManager.default.fileExists(atPath: self.workDir + "/lighttpd.pid") || !self.process.isRunning
        }
        guard process.isRunning else {
            let log = (try? String(contentsOfFile: workDir + "/error.log", encoding: .utf8)) ?? ""
            throw WaitError.timedOut(what: "lighttpd to keep running; error.log: \(log)", after: 0)
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: workDir)
    }

    public func url(_ path: String) -> String { "https://127.0.0.1:\(port)\(path)" }

    /// Stops the server (SIGINT, waited for): lighttpd buffers its access log and writes it out
    /// when it stops, so `requestLog` is complete only after this.
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
    }

    /// Requests served: the client port of the connection each came on (one port, one
    /// connection), its protocol, status and body bytes.
    public func requestLog() -> [(remotePort: Int, proto: String, status: Int, bytes: Int)] {
        let text = (try? String(contentsOfFile: workDir + "/access.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 4, let port = Int(f[0]), let status = Int(f[2]) else { return nil }
            return (port, String(f[1]), status, Int(f[3]) ?? 0)
        }
    }
}
