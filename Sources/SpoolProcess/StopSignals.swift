import Foundation

/// SIGTERM and SIGINT (and, when asked for, SIGHUP), turned into messages for the engine.
///
/// The handlers are installed with `sigaction` before the daemon says it is ready, so a signal
/// that arrives at any moment after that is never lost. (A dispatch signal source registers
/// asynchronously on libdispatch's manager thread: a signal in that window would be dropped, and
/// the daemon would never stop.) The handler does the one
/// async-signal-safe thing — write the signal number to a pipe — and a small thread, asleep in
/// `read` otherwise, posts it to the inbox.
public enum StopSignals {
    /// The pipe's write end, for the C handler (which can capture nothing).
    nonisolated(unsafe) private static var writeFD: Int32 = -1

    /// Installs the handlers once per process; `post` runs on the reader thread for SIGTERM and
    /// SIGINT. With `reload`, SIGHUP is caught too and calls it (on the same thread) instead of
    /// killing the process, which is SIGHUP's default.
    public static func install(post: @escaping @Sendable (Int32) -> Void,
                               reload: (@Sendable () -> Void)? = nil) throws(SignalSetupError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw SignalSetupError(call: "pipe", errno: errno) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        writeFD = fds[1]
        let readFD = fds[0]
        let reader = Thread {
            var byte: UInt8 = 0
            while true {
                let n = read(readFD, &byte, 1)
                if n == 1 {
                    if Int32(byte) == SIGHUP, let reload { reload() } else { post(Int32(byte)) }
                } else if n < 0 && errno == EINTR { continue } else { return }
            }
        }
        reader.name = "spoolfetch-signals"
        reader.start()
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            // The interrupted code may be between a failing call and its read of errno.
            let saved = errno
            var byte = UInt8(truncatingIfNeeded: signal)
            _ = write(StopSignals.writeFD, &byte, 1)
            errno = saved
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        for signal in [SIGTERM, SIGINT] + (reload == nil ? [] : [SIGHUP]) where sigaction(signal, &action, nil) != 0 {
            throw SignalSetupError(call: "sigaction(\(signal))", errno: errno)
        }
    }
}

/// The stop signals could not be set up.
public struct SignalSetupError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let errno: Int32
    public var description: String { "\(call): \(String(cString: strerror(errno))) (errno \(errno))" }
}
