import Foundation
import SpoolCore
import Logging

/// Whether stderr is connected to systemd's journal, and the priority prefix journald reads.
///
/// systemd sets `JOURNAL_STREAM=DEV:INODE` for a service whose stdout/stderr go to the journal.
/// The variable is inherited by children whose stderr may go elsewhere (a shell redirect, a
/// pipe), so it counts only when stderr's own device and inode match it — the check
/// sd_journal_stream_fd(3) recommends. journald then reads a leading `<N>` (syslog priority
/// 0–7, as sd-daemon(3) defines) as the line's priority and strips it.
public enum JournalStream {
    /// stderr is the journal stream named by `$JOURNAL_STREAM`.
    public static func isStandardError(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return matches(value, device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// `value` is `DEV:INODE` in decimal and names this device and inode.
    public static func matches(_ value: String, device: UInt64, inode: UInt64) -> Bool {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let d = UInt64(parts[0]), let i = UInt64(parts[1]) else { return false }
        return d == device && i == inode
    }

    /// `<N>` for the level: critical 2 (crit), error 3 (err), warning 4, notice 5, info 6,
    /// debug and trace 7.
    public static func prefix(for level: Logger.Level) -> String {
        "<\(priority(of: level))>"
    }

    public static func priority(of level: Logger.Level) -> Int {
        switch level {
        case .critical: return 2
        case .error: return 3
        case .warning: return 4
        case .notice: return 5
        case .info: return 6
        case .debug, .trace: return 7
        }
    }
}
