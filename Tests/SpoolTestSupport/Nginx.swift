import Foundation

/// nginx on 127.0.0.1, started by a test (the real server the daemon meets in production),
/// optionally with TLS. Stopped in deinit.
public final class NginxServer: @unchecked Sendable {
    public let port: Int
    public let root: String
    private let process: Process
    private let workDir: String

    /// Serves `root` over https with `certificate`/`key` when given, else plain http; with
    /// `http2`, https offers HTTP/2 (ALPN). With `proxyTo` (an origin's `http://host:port`) every
    /// request is passed to that origin instead (one origin connection per request).
    /// Each request is logged (`requestLog`): its client connection's serial number and protocol.
    /// `rateLimit` (nginx's `limit_rate`, such as `4m`) caps each connection. `httpDirectives`
    /// and `serverDirectives` go into the `http` and `server` blocks as they are (for example
    /// `keepalive_requests 100;`, or a `limit_req_zone` and its `limit_req`).
    /// Each response's status and body bytes sent are logged too (`sentLog`).
    public init(root: String, certificate: String? = nil, key: String? = nil, http2: Bool = false,
                proxyTo origin: String? = nil, rateLimit: String? = nil,
                httpDirectives: String = "", serverDirectives: String = "") throws {
        let nginx = "/usr/sbin/nginx"
        guard FileManager.default.isExecutableFile(atPath: nginx) else {
            throw WaitError.timedOut(what: "nginx at \(nginx) (install nginx-light; `make test` does)", after: 0)
        }
        workDir = try makeTempDirectory(prefix: "spoolfetch-nginx")
        self.root = root
        port = try Self.freePort()
        let tls = certificate.map { "ssl_certificate \($0); ssl_certificate_key \(key!);" } ?? ""
        let config = """
            daemon off; master_process off; worker_processes 1; pid \(workDir)/nginx.pid;
            error_log \(workDir)/error.log warn;
            events { worker_connections 256; }
            http {
              log_format connections '$connection $server_protocol';
              access_log \(workDir)/access.log connections;
              log_format sent '$status $body_bytes_sent';
              access_log \(workDir)/sent.log sent;
              \(httpDirectives)
              client_body_temp_path \(workDir); proxy_temp_path \(workDir); fastcgi_temp_path \(workDir);
              uwsgi_temp_path \(workDir); scgi_temp_path \(workDir);
              server { listen 127.0.0.1:\(port)\(certificate == nil ? "" : " ssl")\(http2 ? " http2" : ""); \(tls) root \(root);
                \(origin.map { "location / { proxy_pass \($0); }" } ?? "") \(rateLimit.map { "limit_rate \($0);" } ?? "") \(serverDirectives) }
            }
            """
        try config.write(toFile: workDir + "/nginx.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: nginx)
        process.arguments = ["-c", workDir + "/nginx.conf", "-p", workDir]
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        try Self.waitUntilListening(workDir: workDir, process: process)
    }

    deinit {
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: workDir)
    }

    /// Requests served so far: the serial number of the client connection each came on, and its
    /// protocol (`HTTP/2.0`, `HTTP/1.1`). nginx writes a request's line when it has answered it.
    public func requestLog() -> [(connection: Int, proto: String)] {
        let text = (try? String(contentsOfFile: workDir + "/access.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 2, let c = Int(f[0]) else { return nil }
            return (c, String(f[1]))
        }
    }

    /// Responses so far: each one's status and the body bytes nginx sent for it (`$body_bytes_sent`,
    /// for a response cut short too: what it had written to the connection).
    public func sentLog() -> [(status: Int, bytes: Int)] {
        let text = (try? String(contentsOfFile: workDir + "/sent.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 2, let status = Int(f[0]), let bytes = Int(f[1]) else { return nil }
            return (status, bytes)
        }
    }

    public func url(_ path: String, scheme: String = "http") -> String { "\(scheme)://127.0.0.1:\(port)\(path)" }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard ok else { throw WaitError.timedOut(what: "a free port", after: 0) }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// nginx writes its pid file after it has opened its listening sockets: that file is the
    /// readiness signal, waited for with inotify.
    static func waitUntilListening(workDir: String, process: Process) throws {
        try DirectoryWaiter.wait(in: workDir, timeout: 10, what: "nginx to start (its pid file)") {
            FileManager.default.fileExists(atPath: workDir + "/nginx.pid") || !process.isRunning
        }
        guard process.isRunning else {
            let log = (try? String(contentsOfFile: workDir + "/error.log", encoding: .utf8)) ?? ""
            throw WaitError.timedOut(what: "nginx to keep running; error.log: \(log)", after: 0)
        }
    }
}

/// A throw-away certificate authority and a server certificate for 127.0.0.1, made with the
/// openssl command line.
public struct TestCertificates {
    public let caCertificate: String
    public let serverCertificate: String
    public let serverKey: String

    public init(in directory: String) throws {
        caCertificate = directory + "/ca.pem"
        serverCertificate = directory + "/server.pem"
        serverKey = directory + "/server.key"
        let ext = directory + "/san.ext"
        try "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n".write(toFile: ext, atomically: true, encoding: .utf8)
        for args in [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=spoolfetch test CA",
             "-keyout", directory + "/ca.key", "-out", caCertificate],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", serverKey, "-out", directory + "/server.csr"],
            ["x509", "-req", "-in", directory + "/server.csr", "-CA", caCertificate, "-CAkey", directory + "/ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", serverCertificate],
        ] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            p.arguments = args
            p.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            p.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try p.run()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw WaitError.timedOut(what: "openssl \(args[0]) to succeed", after: 0) }
        }
    }
}
