import Foundation
import SpoolCore
import Logging
import SpoolMetrics
import SpoolStore

/// Writes the daemon's metrics (`DaemonMetrics`) as Prometheus text: always to
/// `status/HOST-PID.prom`, beside the status report (what `spoolfetch status --metrics` reads),
/// and with `--metrics-file` to that file too (node_exporter's textfile collector) — each
/// atomically (a `.NAME.tmp` renamed over it, a name the collector ignores).
///
/// At most every `--metrics-interval`, and only after something changed: the engine calls
/// `changed()` whenever it writes a status report, and a write whose text is the same as the
/// last one's writes nothing. An idle daemon has no deadline here, so it stays asleep.
final class MetricsWriter {
    let metrics: DaemonMetrics
    private let statusFolder: Directory
    private let statusName: String
    /// `--metrics-file`: its folder and its name there.
    private var file: (folder: Directory, name: String)?
    private var interval: Double
    private let logger: Logger
    private var pending = true
    private var lastWrite: Date?
    private var lastText: [UInt8] = []
    /// `TransferSession.bodyBytesReceived` as counted so far.
    private var bytesCounted: Int64 = 0
    private var warned = false

    init(metrics: DaemonMetrics, statusFolder: Directory, statusName: String, path: String?, interval: Double,
         logger: Logger) throws(StoreError) {
        self.metrics = metrics
        self.statusFolder = statusFolder
        self.statusName = statusName
        self.interval = interval
        self.logger = logger
        file = try path.map { p throws(StoreError) in try Self.open(p) }
    }

    /// A reload: a new interval (and file) from the next write on.
    func update(path: String?, interval: Double) {
        self.interval = interval
        do {
            file = try path.map { p throws(StoreError) in try Self.open(p) }
        } catch {
            logger.error("--metrics-file: its folder cannot be opened; metrics go to status/ only: \(error)")
            file = nil
        }
        pending = true
    }

    private static func open(_ path: String) throws(StoreError) -> (folder: Directory, name: String) {
        let name = (path as NSString).lastPathComponent
        let parent = (path as NSString).deletingLastPathComponent
        return (try Directory(opening: parent.isEmpty ? "." : parent), name)
    }

    /// Something the metrics count may have changed.
    func changed() { pending = true }

    /// When the next write is due; nil when nothing changed since the last. A store hit is due
    /// within a second, whatever the interval: `spoolfetch store` and a collector see the store's
    /// counters current (they lagged up to `--metrics-interval`, 15 s by default).
    var nextWrite: Date? {
        let storeHit = metrics.storeCountedSinceText
        guard pending || storeHit else { return nil }
        return lastWrite.map { $0.addingTimeInterval(storeHit ? min(interval, 1) : interval) } ?? .distantPast
    }

    /// Sets the gauges, counts the bytes received since the last write, and writes the text if
    /// it differs from the last written.
    func write(now: Date, snapshot: DaemonMetrics.Snapshot, bytesReceived: Int64) {
        metrics.received(bytes: bytesReceived - bytesCounted)
        bytesCounted = bytesReceived
        metrics.set(snapshot)
        pending = false
        lastWrite = now
        let text = metrics.text()
        guard text != lastText else { return }
        lastText = text
        do {
            try statusFolder.writeAtomically(statusName, text)
            if let file { try file.folder.writeAtomically(file.name, text) }
            warned = false
        } catch {
            if !warned { logger.warning("could not write the metrics: \(error)") }
            warned = true
        }
    }

    /// At the end of a run: the status folder's copy goes (`status` shows live daemons only);
    /// `--metrics-file` keeps the last numbers (a drain's totals stay for the collector).
    func remove() {
        statusFolder.remove(statusName)
    }
}
