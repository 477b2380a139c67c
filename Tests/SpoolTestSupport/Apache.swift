import Foundation

/// Apache httpd on 127.0.0.1 with a config file of its own, started by a test: the real server
/// whose validators are weak for a file written under a second ago (`ETag: W/"size-mtime"`, and a
/// Last-Modified its `If-Range` takes only a minute later). `mod_ratelimit` caps each response at
/// `kibPerSecond`. Each request is logged as `PORT STATUS BYTES RANGE IF-RANGE` (`-` when absent). Stopped in
/// deinit.
public final class ApacheServer: @unchecked Sendable {
    public let port: Int
    public let root: String
    private let process: Process
    private let workDir: String

    public init(kibPerSecond: Int) throws {
        let apache = "/usr/sbin/apache2"
        guard FileManager.default.isExecutableFile(atPath: apache) else {
            throw WaitError.timedOut(what: "apache2 at \(apache) (install apache2; `make test` does)", after: 0)
        }
        workDir = try makeTempDirectory(prefix: "spoolfetch-apache")
        root = workDir + "/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // Apache refuses to serve as root: its workers run as www-data, who must reach the files.
        for dir in [workDir, root] { chmod(dir, 0o755) }
        port = try NginxServer.freePort()
        let modules = "/usr/lib/apache2/modules"
        let config = """
            ServerRoot "\(workDir)"
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            LoadModule mpm_event_module \(modules)/mod_mpm_event.so
            LoadModule authz_core_module \(modules)/mod_authz_core.so
            LoadModule ratelimit_module \(modules)/mod_ratelimit.so
            LoadModule env_module \(modules)/mod_env.so
            User www-data
            Group www-data
            PidFile "\(workDir)/httpd.pid"
            ErrorLog "\(workDir)/error.log"
            LogFormat "%{remote}p %s %B %{Range}i %{If-Range}i" spool
            CustomLog "\(workDir)/access.log" spool
            DocumentRoot "\(root)"
            <Directory "\(root)">
              Require all granted
              SetOutputFilter RATE_LIMIT
              SetEnv rate-limit \(kibPerSecond)
            </Directory>
            """
        try config.write(toFile: workDir + "/httpd.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: apache)
        process.arguments = ["-f", workDir + "/httpd.conf", "-DFOREGROUND"]
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        // Apache writes its pid file once its listening socket is open.
        try DirectoryWaiter.wait(in: workDir, timeout: 10, what: "apache2 to start (its pid file)") {
            FileManager.default.fileExists(atPath: self.workDir + "/httpd.pid") || !self.process.isRunning
        }
        guard process.isRunning else {
            let log = (try? String(contentsOfFile: workDir + "/error.log", encoding: .utf8)) ?? ""
            throw WaitError.timedOut(what: "apache2 to keep running; error.log: \(log)", after: 0)
        }
    }

    deinit {
        if process.isRunning {
            // SIGTERM: the parent stops its workers and removes its pid file.
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: workDir)
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Writes `bytes` as `name` under the document root (readable by the workers) and returns its
    /// path; with `mtime`, the file then has exactly that modification time (ETag and
    /// Last-Modified as another file of that size and time).
    @discardableResult
    public func write(_ name: String, _ bytes: [UInt8], mtime: timespec? = nil) throws -> String {
        let path = root + "/" + name
        let temp = root + "/." + name + ".tmp"
        try Data(bytes).write(to: URL(fileURLWithPath: temp))
        chmod(temp, 0o644)
        if let mtime {
            let times = [mtime, mtime]
            guard utimensat(AT_FDCWD, temp, times, 0) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        }
        guard rename(temp, path) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return path
    }

    /// Requests served so far (a request is logged when its response ended).
    /// An `If-Range` date has spaces: what follows the range is the If-Range, whole.
    public func requestLog() -> [(remotePort: Int, status: Int, bytes: Int, range: String, ifRange: String)] {
        let text = (try? String(contentsOfFile: workDir + "/access.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ", maxSplits: 4)
            guard f.count == 5, let port = Int(f[0]), let status = Int(f[1]) else { return nil }
            return (port, status, Int(f[2]) ?? 0, String(f[3]), String(f[4]))
        }
    }
}
