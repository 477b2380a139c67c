import Foundation
import SpoolTransfer
import Synchronization
import XCTest

/// Runs a real `TransferSession` the way the engine does (perform, then wait) until the wanted
/// outcomes arrive or a deadline passes. Nothing here is mocked: libcurl talks to 127.0.0.1.
final class SessionDriver {
    let session: TransferSession
    private(set) var outcomes: [Int: TransferOutcome] = [:]

    init(configuration: TransferConfiguration = TransferConfiguration()) throws {
        session = try TransferSession(configuration: configuration)
    }

    /// A fresh, empty staging file (unlinked at once; the descriptor keeps it alive).
    static func scratchFile() throws -> Int32 {
        let path = NSTemporaryDirectory() + "spooltransfer-\(UUID().uuidString)"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        unlink(path)
        return fd
    }

    /// Starts one transfer of `url` into a scratch file and runs it to its end.
    /// `diagnose` adds to the failure message what the caller knows of the other side.
    func fetch(_ url: String, key: Int = 1, timeout: TimeInterval = 20, diagnose: (() -> String)? = nil,
               file: StaticString = #filePath, line: UInt = #line) throws -> TransferOutcome {
        let fd = try Self.scratchFile()
        defer { close(fd) }
        try session.start(key: key, request: TransferRequest(url: url, destination: fd))
        try run(until: { $0.outcomes[key] != nil }, timeout: timeout)
        if outcomes[key] == nil, let diagnose {
            return try XCTUnwrap(outcomes[key], "no outcome for \(url) within \(timeout) s; \(diagnose())", file: file, line: line)
        }
        return try XCTUnwrap(outcomes[key], "no outcome for \(url) within \(timeout) s", file: file, line: line)
    }

    /// Drives the session until `done` holds or `timeout` passes; `tick` runs once per turn.
    func run(until done: (SessionDriver) -> Bool, timeout: TimeInterval, tick: (() -> Void)? = nil) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !done(self), Date() < deadline {
            for outcome in try session.performTransfers() { outcomes[outcome.key] = outcome }
            tick?()
            if done(self) { break }
            // As the engine does: no longer than the rate gate's next resume.
            var sleep: Int32 = 50
            if let resume = session.nextRateDeadline() {
                sleep = min(sleep, Int32(max(0, (resume.timeIntervalSinceNow * 1000).rounded(.up))))
            }
            try session.sleep(timeoutMilliseconds: sleep)
        }
    }
}

/// A TCP listener on 127.0.0.1 that accepts connections and ends each one without a byte:
/// closed (FIN) or reset (RST). For the "reached nothing" side of the failure table.
final class SilentListener: @unchecked Sendable {
    enum Ending { case close, reset }
    let port: Int
    private let fd: Int32
    private let thread: Thread
    /// Connections accepted, and how the accept loop ended (nil while it runs): for the message
    /// of a test that waited in vain.
    private let record = ListenerRecord()

    private final class ListenerRecord: Sendable {
        let state = Mutex<(accepted: Int, ended: String?)>((0, nil))
    }

    /// What the listener did, and the kernel's sockets on its port (`ss`).
    var diagnosis: String {
        let (accepted, ended) = record.state.withLock { $0 }
        let ss = Process()
        ss.executableURL = URL(fileURLWithPath: "/usr/bin/ss")
        ss.arguments = ["-tanoi", "( sport = :\(port) or dport = :\(port) )"]
        let pipe = Pipe()
        ss.standardOutput = pipe
        try? ss.run()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        ss.waitUntilExit()
        return "listener accepted \(accepted), its loop \(ended ?? "still runs"); sockets: \(text)"
    }

    init(ending: Ending) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        let listening = fd
        let record = self.record
        thread = Thread {
            while true {
                let client = accept(listening, nil, nil)
                if client < 0 {
                    // A signal (the suite's child processes end: SIGCHLD) or a client gone before
                    // the accept must not end the listener: a later connection would then sit in
                    // the backlog unanswered, and the client wait for its stall timeout. Only
                    // `stop()` (EBADF/EINVAL) ends it.
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    let why = String(cString: strerror(errno))
                    record.state.withLock { $0.ended = "ended: accept: \(why)" }
                    return
                }
                // Close-on-exec: a child process started meanwhile by another thread must not
                // inherit the connection and keep it open after the close below.
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                record.state.withLock { $0.accepted += 1 }
                if ending == .reset {
                    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                    setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                }
                close(client)
            }
        }
        thread.start()
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}

/// A port on 127.0.0.1 that nothing listens on (bound, then closed).
func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}
