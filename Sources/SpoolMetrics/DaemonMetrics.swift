import CoreMetrics
import Foundation
import Prometheus

/// The daemon's numbers for Prometheus: counters the engine bumps as things happen (through the
/// swift-metrics API, `Counter` and `Timer`), gauges it sets from its status report before each
/// write (`Meter`), and the exposition text (swift-prometheus's registry), for the node_exporter
/// textfile collector or `spoolfetch status --metrics`.
///
/// Every series carries `worker="HOST-PID"` (the status report's name), so several daemons on one
/// spool, or on one host, can write into one collector folder. The registry is this object's own
/// (never the process-wide `MetricsSystem`), so tests may make several. Thread-safe: hooks end on
/// their own threads.
public final class DaemonMetrics: @unchecked Sendable {
    public let worker: String
    private let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let lock = NSLock()
    private var counters: [String: CoreMetrics.Counter] = [:]
    private var meters: [String: CoreMetrics.Meter] = [:]
    private var timers: [String: CoreMetrics.Timer] = [:]
    /// Hosts with an outage gauge now (removed when they answer again).
    private var outageHosts: Set<String> = []

    /// The item states `spoolfetch_items` always has a series for (0 when none is in it).
    public static let states = ["pending", "waiting-start", "waiting-window", "waiting-space", "running", "retrying",
                                "paused", "publishing"]

    public init(worker: String, version: String, startedAt: Date) {
        self.worker = worker
        factory = PrometheusMetricsFactory(registry: registry)
        meter("spoolfetch_start_time_seconds", help: "When the daemon started, seconds since 1970").set(startedAt.timeIntervalSince1970)
        meter("spoolfetch_build_info", ["version": version], help: "The daemon's version (always 1)").set(1)
        for name in ["spoolfetch_requests_claimed_total", "spoolfetch_requests_rejected_total",
                     "spoolfetch_received_bytes_total", "spoolfetch_space_waits_total"] {
            _ = counter(name)
        }
        for outcome in ["published", "unchanged"] { _ = counter("spoolfetch_items_ended_total", ["outcome": outcome]) }
        for hook in ["item", "group"] {
            for name in ["spoolfetch_hook_runs_total", "spoolfetch_hook_failures_total", "spoolfetch_hook_timeouts_total"] {
                _ = counter(name, ["hook": hook])
            }
        }
        _ = timer("spoolfetch_publish_latency_seconds")
        _ = timer("spoolfetch_item_duration_seconds")
    }

    // MARK: Events

    /// An item ended: `published`, `unchanged` (a 304 kept the file) or `failed` with its reason
    /// code (`http-status`, `too-large`, …). `seconds`: from its first start to its end.
    public func itemEnded(outcome: String, code: String? = nil, seconds: Double?) {
        var labels = ["outcome": outcome]
        if let code { labels["code"] = code }
        counter("spoolfetch_items_ended_total", labels).increment()
        if let seconds { timer("spoolfetch_item_duration_seconds").recordNanoseconds(Int64(max(0, seconds) * 1e9)) }
    }

    /// `count` items ended alike at once (a request's cancel): one counter update, not `count`.
    public func itemsEnded(outcome: String, code: String, count: Int) {
        guard count > 0 else { return }
        counter("spoolfetch_items_ended_total", ["outcome": outcome, "code": code]).increment(by: Int64(count))
    }

    /// A body was complete; `seconds` later its file was published (the publisher's batch).
    public func published(latency seconds: Double) {
        timer("spoolfetch_publish_latency_seconds").recordNanoseconds(Int64(max(0, seconds) * 1e9))
    }

    /// The content store is on (`--store`): its series exist from the start, at 0.
    public func storeEnabled() {
        _ = counter("spoolfetch_store_hits_total")
        _ = counter("spoolfetch_store_saved_bytes_total")
    }

    /// An item was published from the content store: `bytes` not fetched.
    public func storeHit(bytes: Int64) {
        counter("spoolfetch_store_hits_total").increment()
        if bytes > 0 { counter("spoolfetch_store_saved_bytes_total").increment(by: bytes) }
        lock.withLock { storeCounted = true }
    }

    /// A store hit was counted since the text was last taken (`text()`): its writer writes
    /// within a second rather than at its interval, so that the store's counters are current.
    public var storeCountedSinceText: Bool { lock.withLock { storeCounted } }
    private var storeCounted = false

    public func requestClaimed() { counter("spoolfetch_requests_claimed_total").increment() }
    public func requestRejected() { counter("spoolfetch_requests_rejected_total").increment() }
    public func spaceWait() { counter("spoolfetch_space_waits_total").increment() }

    /// Body bytes received since the last call.
    public func received(bytes: Int64) {
        if bytes > 0 { counter("spoolfetch_received_bytes_total").increment(by: bytes) }
    }

    /// An upload's body the server accepted (2xx): `bytes` sent.
    public func sent(bytes: Int64) {
        if bytes > 0 { counter("spoolfetch_sent_bytes_total").increment(by: bytes) }
    }

    /// A hook ended; `hook` is `item`, `group` or `refresh`.
    public func hookEnded(_ hook: String, failed: Bool, timedOut: Bool) {
        counter("spoolfetch_hook_runs_total", ["hook": hook]).increment()
        if failed { counter("spoolfetch_hook_failures_total", ["hook": hook]).increment() }
        if timedOut { counter("spoolfetch_hook_timeouts_total", ["hook": hook]).increment() }
    }

    // MARK: Gauges

    /// What the daemon holds now, set before each write.
    public struct Snapshot: Sendable {
        public var states: [String: Int] = [:]
        public var running = 0
        /// Connections the running transfers hold (an HTTP/2 connection counts once however
        /// many streams it carries; each range of a segmented item counts).
        public var connections = 0
        /// Items waiting (every state but running and publishing).
        public var queued = 0
        /// Unreachable hosts (`host:port`) and since when.
        public var outages: [(host: String, since: Date)] = []
        /// When the longest-waiting open item was first queued.
        public var oldestQueued: Date?
        /// The daemon-wide `--max-rate` in force (0: none).
        public var maxRate: Int64 = 0
        public var hooksRunning = 0
        public var hooksWaiting = 0
        /// The content store's entries and bytes, when it is on.
        public var store: (entries: Int, bytes: Int64)? = nil
        public init() {}
    }

    public func set(_ s: Snapshot) {
        for state in Set(Self.states).union(s.states.keys) {
            meter("spoolfetch_items", ["state": state], help: "Open items per state").set(s.states[state] ?? 0)
        }
        meter("spoolfetch_transfers_running", help: "Transfers running now").set(s.running)
        meter("spoolfetch_connections", help: "Connections the running transfers hold (an HTTP/2 connection counts once)")
            .set(s.connections)
        meter("spoolfetch_items_queued", help: "Open items not running nor publishing").set(s.queued)
        meter("spoolfetch_oldest_queued_timestamp_seconds",
              help: "When the longest-waiting open item was first queued, seconds since 1970 (0: none waits)")
            .set(s.oldestQueued?.timeIntervalSince1970 ?? 0)
        meter("spoolfetch_max_rate_bytes", help: "The daemon-wide receive rate cap in force, bytes per second (0: none)")
            .set(s.maxRate)
        meter("spoolfetch_hooks_running", help: "Hooks running now").set(s.hooksRunning)
        meter("spoolfetch_hooks_waiting", help: "Hooks waiting for a slot").set(s.hooksWaiting)
        meter("spoolfetch_hosts_unreachable", help: "Hosts held because they could not be reached").set(s.outages.count)
        if let store = s.store {
            meter("spoolfetch_store_entries", help: "Entries in the content store (every worker's)").set(store.entries)
            meter("spoolfetch_store_bytes", help: "Bytes in the content store (every worker's)").set(store.bytes)
        }
        lock.lock()
        let gone = outageHosts.subtracting(s.outages.map(\.host))
        outageHosts = Set(s.outages.map(\.host))
        lock.unlock()
        for host in gone { removeMeter("spoolfetch_host_unreachable_since_timestamp_seconds", ["host": host]) }
        for (host, since) in s.outages {
            meter("spoolfetch_host_unreachable_since_timestamp_seconds", ["host": host],
                  help: Self.outageHelp)
                .set(since.timeIntervalSince1970)
        }
    }

    /// The exposition text (Prometheus text format 0.0.4).
    public func text() -> [UInt8] {
        lock.withLock { storeCounted = false }
        return registry.emitToBuffer()
    }

    // MARK: Handles

    private static let help: [String: String] = [
        "spoolfetch_items_ended_total": "Items ended, by outcome and, for failures, reason code",
        "spoolfetch_requests_claimed_total": "Request files claimed",
        "spoolfetch_requests_rejected_total": "Request files rejected (see R.error)",
        "spoolfetch_received_bytes_total": "Response body bytes received",
        "spoolfetch_space_waits_total": "Times an item waited for disk space",
        "spoolfetch_hook_runs_total": "Hooks run",
        "spoolfetch_store_hits_total": "Items published from the content store, without a request",
        "spoolfetch_store_saved_bytes_total": "Bytes published from the content store instead of fetched",
        "spoolfetch_hook_failures_total": "Hooks that exited non-zero, were killed or could not start",
        "spoolfetch_hook_timeouts_total": "Hooks killed past --hook-timeout",
        "spoolfetch_publish_latency_seconds": "From a complete body to its file published",
        "spoolfetch_item_duration_seconds": "From an item's first start to its end",
    ]

    private static let outageHelp = "When an unreachable host was first found so, seconds since 1970"

    /// The whole name as the metric name (no namespace or unit parts to join).
    private static func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    private func key(_ name: String, _ labels: [String: String]) -> String {
        ([name] + labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }).joined(separator: "\u{1}")
    }

    private func dimensions(_ labels: [String: String]) -> [(String, String)] {
        [("worker", worker)] + labels.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private func counter(_ name: String, _ labels: [String: String] = [:]) -> CoreMetrics.Counter {
        let k = key(name, labels)
        lock.lock(); defer { lock.unlock() }
        if let c = counters[k] { return c }
        let handler = registry.makeCounter(descriptor: Self.descriptor(name, Self.help[name] ?? ""), labels: dimensions(labels))
        let c = CoreMetrics.Counter(label: name, dimensions: dimensions(labels), handler: handler, factory: factory)
        counters[k] = c
        return c
    }

    private func meter(_ name: String, _ labels: [String: String] = [:], help: String) -> CoreMetrics.Meter {
        let k = key(name, labels)
        lock.lock(); defer { lock.unlock() }
        if let m = meters[k] { return m }
        let handler = registry.makeGauge(descriptor: Self.descriptor(name, help), labels: dimensions(labels))
        let m = CoreMetrics.Meter(label: name, dimensions: dimensions(labels), handler: handler, factory: factory)
        meters[k] = m
        return m
    }

    private func removeMeter(_ name: String, _ labels: [String: String]) {
        let k = key(name, labels)
        lock.lock(); defer { lock.unlock() }
        guard meters.removeValue(forKey: k) != nil else { return }
        registry.unregisterGauge(registry.makeGauge(descriptor: Self.descriptor(name, Self.outageHelp), labels: dimensions(labels)))
    }

    /// Buckets from 5 ms to an hour: a publish takes milliseconds, an item minutes.
    private static let buckets: [Duration] = [.milliseconds(5), .milliseconds(25), .milliseconds(100), .milliseconds(500),
                                              .seconds(1), .seconds(5), .seconds(30), .seconds(120), .seconds(600),
                                              .seconds(3600)]

    private func timer(_ name: String) -> CoreMetrics.Timer {
        let k = key(name, [:])
        lock.lock(); defer { lock.unlock() }
        if let t = timers[k] { return t }
        let handler = registry.makeDurationHistogram(descriptor: Self.descriptor(name, Self.help[name] ?? ""),
                                                     labels: dimensions([:]), buckets: Self.buckets)
        let t = CoreMetrics.Timer(label: name, dimensions: dimensions([:]), handler: handler, factory: factory)
        timers[k] = t
        return t
    }
}
