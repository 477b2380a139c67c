import CLinux
import Foundation

/// Waiting for any process to exit, a child or not, without polling: the kernel makes a pidfd
/// readable when the process exits (pidfd_open(2), Linux 5.3).
public enum ProcessExit {
    /// True once `pid` has exited (or no longer exists); false when `timeout` seconds pass first.
    public static func wait(_ pid: Int32, timeout: Double) -> Bool {
        let fd = spoolfetch_pidfd_open(pid)
        if fd < 0 { return errno == ESRCH }
        defer { close(fd) }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = Int32(max(0, deadline.timeIntervalSinceNow * 1000).rounded(.up))
            let ready = poll(&entry, 1, left)
            if ready > 0 { return true }
            if ready == 0 { return false }
            if errno != EINTR { return false }
        }
    }
}
