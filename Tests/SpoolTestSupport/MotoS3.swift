import Foundation

/// moto's S3 server (`Tests/S3/moto-s3.py`) on 127.0.0.1 with signature checking on: a private
/// bucket whose objects only requests signed with the access key it made can read. moto and boto3
/// come from PyPI into a virtual environment under `.build/moto-venv`, made on first use (a fresh
/// CI machine has none) and kept: `python3 -m venv` needs Debian's python3-venv (`make test-deps`).
public final class MotoS3Server: @unchecked Sendable {
    public let port: Int
    public let accessKeyId: String
    public let secretAccessKey: String
    private let process: Process
    private let input: Pipe
    private let workDir: String

    /// The versions the tests were written against.
    static let packages = ["moto[server]==5.2.6", "boto3==1.44.18"]

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The virtual environment's python, made first when missing (into a scratch folder renamed
    /// into place when complete, so that a killed install is not taken for a made one).
    public static func python() throws -> String {
        let venv = packageRoot.appendingPathComponent(".build/moto-venv").path
        let python = venv + "/bin/python"
        if FileManager.default.isExecutableFile(atPath: python) { return python }
        let base = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
        let scratch = venv + ".making-\(getpid())"
        try? FileManager.default.removeItem(atPath: scratch)
        let started = Date()
        try run("/usr/bin/env", [base, "-m", "venv", scratch], timeout: 300, what: "\(base) -m venv (install python3-venv)")
        try run(scratch + "/bin/python", ["-m", "pip", "install", "--quiet", "--disable-pip-version-check"] + packages,
                timeout: 1500, what: "pip install \(packages.joined(separator: " ")) (PyPI)")
        try FileManager.default.moveItem(atPath: scratch, toPath: venv)
        FileHandle.standardError.write(Data("moto's virtual environment made in \(Int(-started.timeIntervalSinceNow)) s\n".utf8))
        return python
    }

    /// Starts the server with `bucket` holding `objects` (key → file whose bytes it gets), and
    /// waits until it has made them and turned authentication on.
    public init(bucket: String, objects: [String: String], timeout: Double = 120) throws {
        let python = try Self.python()
        workDir = try makeTempDirectory(prefix: "spoolfetch-moto")
        let script = Self.packageRoot.appendingPathComponent("Tests/S3/moto-s3.py").path
        process = Process()
        input = Pipe()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, workDir + "/requests.log", bucket] + objects.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        // Its one line of stdout, `READY PORT KEY SECRET`, read on a thread of its own so that a
        // server that never gets there is given up on at the deadline.
        let ready = DispatchSemaphore(value: 0)
        let said = SaidLine()
        Thread.detachNewThread {
            said.text = String(decoding: output.fileHandleForReading.readDataToEndOfFileOrLine(), as: UTF8.self)
            ready.signal()
        }
        guard ready.wait(timeout: .now() + timeout) == .success else {
            process.terminate()
            throw WaitError.timedOut(what: "moto's S3 server to be ready", after: timeout)
        }
        let line = said.text
        let fields = line.split(separator: " ").map(String.init)
        guard fields.count == 4, fields[0] == "READY", let port = Int(fields[1]) else {
            process.terminate()
            throw WaitError.timedOut(what: "moto's S3 server to say READY (it said \(line.debugDescription))", after: 0)
        }
        self.port = port
        accessKeyId = fields[2]
        secretAccessKey = fields[3]
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: workDir)
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Requests answered since it was ready: method, path, status, the Range asked (`-`: none)
    /// and whether an AWS4-HMAC-SHA256 signature came.
    public func requests() -> [(method: String, path: String, status: Int, range: String, signed: Bool)] {
        let text = (try? String(contentsOfFile: workDir + "/requests.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ").map(String.init)
            guard f.count == 5, let status = Int(f[2]) else { return nil }
            return (f[0], f[1], status, f[3], f[4] == "signed")
        }
    }

    private static func run(_ tool: String, _ arguments: [String], timeout: Double, what: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        let done = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in done.signal() }
        try p.run()
        guard done.wait(timeout: .now() + timeout) == .success else {
            p.terminate()
            throw WaitError.timedOut(what: what, after: timeout)
        }
        guard p.terminationStatus == 0 else {
            throw WaitError.timedOut(what: "\(what) to succeed (exit status \(p.terminationStatus))", after: 0)
        }
    }
}

/// The line the reader thread read, handed over through the semaphore.
private final class SaidLine: @unchecked Sendable { var text = "" }

extension FileHandle {
    /// Bytes up to the first newline (not included), or to the end.
    fileprivate func readDataToEndOfFileOrLine() -> Data {
        var line = Data()
        while true {
            let byte = readData(ofLength: 1)
            if byte.isEmpty || byte.first == 0x0A { return line }
            line.append(byte)
        }
    }
}

/// The README's examples, for tests that run them as they stand: a fenced block is found by its
/// first line (such as `# /etc/spoolfetch/credentials/nightly-exports`), so the manual and the
/// test cannot drift apart.
public enum ReadmeExample {
    /// The first block whose first line is `firstLine` and that holds `text` when given.
    public static func block(startingWith firstLine: String, containing text: String? = nil) throws -> String {
        let readme = try String(contentsOf: MotoS3Server.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let parts = readme.components(separatedBy: "```")
        // Odd parts are inside fences; a fence's info string (```sh) is its first line.
        for (index, part) in parts.enumerated() where index % 2 == 1 {
            var lines = part.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if !lines.isEmpty { lines.removeFirst() }
            let block = lines.joined(separator: "\n")
            if lines.first == firstLine, text.map({ block.contains($0) }) ?? true { return block }
        }
        throw WaitError.timedOut(what: "a README block starting with \(firstLine.debugDescription)", after: 0)
    }
}
