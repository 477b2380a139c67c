import Dispatch
import Foundation

/// The terminal `status --watch` draws on, like `top`: the alternate screen (the shell's screen
/// and scrollback stay as they were), the cursor hidden, each frame drawn from the top-left corner
/// over the last one. A window size change (SIGWINCH) ends the wait for the next frame at once,
/// so the next frame fits the new size; SIGINT, SIGTERM and SIGHUP end it too, and `restore`
/// gives the terminal back as it was before the program exits.
public final class TerminalScreen {
    /// Why `wait` returned.
    public enum Wake { case tick, resized, stop }

    private let output: Int32
    private let wakeUp = DispatchSemaphore(value: 0)
    private let queue = DispatchQueue(label: "spoolfetch.status.signals")
    private var sources: [DispatchSourceSignal] = []
    private let flags = Flags()
    private var restored = false

    /// Takes over the terminal on `output`.
    public init(output: Int32 = STDOUT_FILENO) {
        self.output = output
        for (signo, flag) in [(SIGWINCH, \Flags.resized), (SIGINT, \Flags.stop), (SIGTERM, \Flags.stop), (SIGHUP, \Flags.stop)] {
            signal(signo, SIG_IGN)      // delivered to the dispatch source instead
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            let flags = self.flags, wakeUp = self.wakeUp
            source.setEventHandler {
                flags.set(flag)
                wakeUp.signal()
            }
            source.resume()
            sources.append(source)
        }
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J")
    }

    deinit { restore() }

    /// Columns and rows of the terminal now (80 × 24 when it cannot say).
    public var size: (columns: Int, rows: Int) {
        var ws = winsize()
        guard ioctl(output, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 else { return (80, 24) }
        return (Int(ws.ws_col), Int(ws.ws_row))
    }

    /// Draws `lines` (each at most the width; no more than the height) from the top-left
    /// corner: each line clears what is left of the old one, and what lies below the last goes.
    /// No newline after the last line: on the bottom row it would scroll the screen.
    /// False when the terminal is gone (its writes fail): the caller stops.
    @discardableResult
    public func draw(_ lines: [String]) -> Bool {
        write("\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J")
    }

    /// Waits up to `seconds` for the next frame; returns early on a resize or a stop signal.
    public func wait(seconds: Double) -> Wake {
        _ = wakeUp.wait(timeout: .now() + seconds)
        if flags.take(\.stop) { return .stop }
        if flags.take(\.resized) { return .resized }
        return .tick
    }

    /// Leaves the alternate screen and shows the cursor again (once).
    public func restore() {
        guard !restored else { return }
        restored = true
        write("\u{1B}[?25h\u{1B}[?1049l")
        for source in sources { source.cancel() }
    }

    @discardableResult
    private func write(_ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Foundation.write(output, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return false }
            bytes = bytes.dropFirst(n)
        }
        return true
    }

    /// Set by the signal handlers, taken by `wait`.
    private final class Flags: @unchecked Sendable {
        private let lock = NSLock()
        var resized = false
        var stop = false
        func set(_ flag: ReferenceWritableKeyPath<Flags, Bool>) { lock.lock(); self[keyPath: flag] = true; lock.unlock() }
        func take(_ flag: ReferenceWritableKeyPath<Flags, Bool>) -> Bool {
            lock.lock(); defer { lock.unlock() }
            let was = self[keyPath: flag]
            self[keyPath: flag] = false
            return was
        }
    }
}
