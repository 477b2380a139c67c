import Foundation

/// squid on 127.0.0.1, started by a test with a config it writes: the forward proxy the daemon
/// meets in production. Two ports: `forbiddingPort` refuses every `CONNECT` (403, its rules),
/// `authPort` wants credentials nobody has (407). Stopped (SIGTERM, no grace period) in deinit.
public final class SquidProxy: @unchecked Sendable {
    public let forbiddingPort: Int
    public let authPort: Int
    private let process: Process
    private let workDir: String

    public init() throws {
        let squid = "/usr/sbin/squid"
        guard FileManager.default.isExecutableFile(atPath: squid) else {
            throw WaitError.timedOut(what: "squid at \(squid) (install squid; `make test` does)", after: 0)
        }
        workDir = try makeTempDirectory(prefix: "spoolfetch-squid")
        // squid started as root runs as its `proxy` user, which writes its logs here.
        _ = chmod(workDir, 0o777)
        forbiddingPort = try NginxServer.freePort()
        var auth = try NginxServer.freePort()
        while auth == forbiddingPort { auth = try NginxServer.freePort() }
        authPort = auth
        try "".write(toFile: workDir + "/passwd", atomically: true, encoding: .utf8)
        _ = chmod(workDir + "/passwd", 0o644)
        let config = """
            http_port 127.0.0.1:\(forbiddingPort) name=forbidding
            http_port 127.0.0.1:\(authPort) name=auth
            pid_filename \(workDir)/squid.pid
            cache_log \(workDir)/cache.log
            access_log stdio:\(workDir)/access.log
            cache_store_log none
            coredump_dir \(workDir)
            cache deny all
            cache_mem 4 MB
            shutdown_lifetime 0 seconds
            dns_nameservers 127.0.0.1
            auth_param basic program /usr/lib/squid/basic_ncsa_auth \(workDir)/passwd
            auth_param basic children 1 startup=0 idle=1
            acl on_forbidding myportname forbidding
            acl on_auth myportname auth
            acl loopback src 127.0.0.0/8
            acl authenticated proxy_auth REQUIRED
            http_access deny on_forbidding CONNECT
            http_access deny on_auth !authenticated
            http_access allow loopback
            http_access deny all
            """
        try config.write(toFile: workDir + "/squid.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: squid)
        process.arguments = ["-N", "-f", workDir + "/squid.conf"]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        // squid logs each port as it opens it: that line is the readiness signal.
        let log = workDir + "/cache.log"
        try DirectoryWaiter.wait(in: workDir, timeout: 20, what: "squid to listen on both ports (cache.log)") {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return text.components(separatedBy: "Accepting HTTP Socket connections").count == 3 || !process.isRunning
        }
        guard process.isRunning else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw WaitError.timedOut(what: "squid to keep running; cache.log: \(text)", after: 0)
        }
    }

    public func url(port: Int) -> String { "http://127.0.0.1:\(port)" }

    /// The `CONNECT` requests squid answered, as its access log has them.
    public func connects() -> [String] {
        let text = (try? String(contentsOfFile: workDir + "/access.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.contains(" CONNECT ") }.map(String.init)
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: workDir)
    }
}
