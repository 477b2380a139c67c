internal import CNetlink
import Foundation

/// Tells when the machine's network changed: a route or an address appeared (rtnetlink
/// RTM_NEWROUTE / RTM_NEWADDR on the RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE, RTMGRP_IPV4_IFADDR and
/// RTMGRP_IPV6_IFADDR groups), so that hosts waiting out an outage are probed at once instead of
/// at their next back-off step.
///
/// It runs its own thread, asleep in poll(2) with no timeout while nothing changes (no wake-ups
/// at all on an idle machine). Changes are debounced: a burst (an interface coming up brings
/// several addresses and routes) is reported once, `debounce` after the last message of the
/// burst, and never later than `maxDelay` after its first. `onChange` runs on the monitor's thread;
/// it should only post a message to the engine.
///
/// The socket is opened in `start()`, in the network namespace of the calling thread.
public final class NetworkChangeMonitor: @unchecked Sendable {
    /// One debounced report.
    public struct Change: Sendable, Hashable {
        /// RTM_NEWROUTE messages in the burst.
        public var newRoutes = 0
        /// RTM_NEWADDR messages in the burst.
        public var newAddresses = 0
        /// The kernel dropped notifications (socket buffer full): something changed.
        public var overflowed = false
        public var isEmpty: Bool { newRoutes == 0 && newAddresses == 0 && !overflowed }
    }

    private let debounce: TimeInterval
    private let maxDelay: TimeInterval
    private let onChange: @Sendable (Change) -> Void
    private let onFailure: @Sendable (NetworkMonitorError) -> Void
    private var netlink: Int32 = -1
    private var wake: (Int32, Int32) = (-1, -1)
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - debounce: quiet time after the last message before a burst is reported.
    ///   - maxDelay: a burst that never quiets down is reported after this long anyway.
    ///   - onFailure: reading the socket failed; the monitor has stopped.
    public init(debounce: TimeInterval = 0.5, maxDelay: TimeInterval = 2,
                onChange: @escaping @Sendable (Change) -> Void,
                onFailure: @escaping @Sendable (NetworkMonitorError) -> Void = { _ in }) {
        self.debounce = max(0, debounce)
        self.maxDelay = max(debounce, maxDelay)
        self.onChange = onChange
        self.onFailure = onFailure
    }

    deinit { stop() }

    /// Opens the netlink socket (in the calling thread's network namespace) and starts the thread.
    public func start() throws(NetworkMonitorError) {
        guard thread == nil else { return }
        let fd = spoolfetch_netlink_open()
        guard fd >= 0 else { throw NetworkMonitorError(call: "socket/bind(AF_NETLINK, NETLINK_ROUTE)", errno: errno) }
        var pair: [Int32] = [-1, -1]
        guard spoolfetch_netlink_wake_pair(&pair) == 0 else {
            let e = errno
            close(fd)
            throw NetworkMonitorError(call: "socketpair", errno: e)
        }
        netlink = fd
        wake = (pair[0], pair[1])
        let thread = Thread { [self] in run() }
        thread.name = "spoolfetch-netlink"
        self.thread = thread
        thread.start()
    }

    /// Stops the thread and closes the sockets. Waits for the thread to end.
    public func stop() {
        guard thread != nil else { return }
        thread = nil
        var byte: UInt8 = 1
        _ = write(wake.1, &byte, 1)
        finished.wait()
        close(netlink)
        close(wake.0)
        close(wake.1)
        netlink = -1
    }

    private func run() {
        defer { finished.signal() }
        var pending = Change()
        var firstAt = 0.0, lastAt = 0.0
        var fds = [pollfd(fd: netlink, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wake.0, events: Int16(POLLIN), revents: 0)]
        while true {
            var timeout: Int32 = -1
            if !pending.isEmpty {
                let now = Self.monotonic()
                let due = min(lastAt + debounce, firstAt + maxDelay)
                timeout = Int32(max(0, ((due - now) * 1000).rounded(.up)))
            }
            fds[0].revents = 0
            fds[1].revents = 0
            let ready = poll(&fds, 2, timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                onFailure(NetworkMonitorError(call: "poll", errno: errno))
                return
            }
            if fds[1].revents != 0 { return }
            if fds[0].revents != 0 {
                var counts = spoolfetch_netlink_counts()
                if spoolfetch_netlink_drain(netlink, &counts) != 0 {
                    onFailure(NetworkMonitorError(call: "recv(netlink)", errno: errno))
                    return
                }
                let change = Change(newRoutes: Int(counts.new_routes), newAddresses: Int(counts.new_addresses),
                                    overflowed: counts.overflowed > 0)
                if !change.isEmpty {
                    let now = Self.monotonic()
                    if pending.isEmpty { firstAt = now }
                    lastAt = now
                    pending.newRoutes += change.newRoutes
                    pending.newAddresses += change.newAddresses
                    pending.overflowed = pending.overflowed || change.overflowed
                }
            }
            if !pending.isEmpty {
                let now = Self.monotonic()
                if now >= lastAt + debounce || now >= firstAt + maxDelay {
                    onChange(pending)
                    pending = Change()
                }
            }
        }
    }

    private static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// The monitor could not open or read its netlink socket (`call` failed with `errno`).
public struct NetworkMonitorError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let errno: Int32
    public var description: String { "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}
