import Foundation
import SpoolCore
import SpoolMetrics

/// What the loop writes down for operators: the status report (`StatusReporter`) and the
/// Prometheus numbers (`MetricsWriter`), from the rooms' state.
extension Engine {
    func writeStatus(now: Date) {
        let window = hosts.scheduler.configuration.window
        let spaceLook = space.waitingCount > 0 ? space.look(running: driver.running.values) : nil
        operators.status.busyHosts = hosts.busyHosts
        operators.status.write(now: now, table: items.table, window: window, task: { record in
            let shortage = spaceLook?.shortage(for: record)
            // Only a queued or retrying item's status names what holds its host (`ItemMachine.status`).
            let waitsForHost = record.phase == .queued || record.phase == .retrying
            var task = StatusReporter.task(record, now: now, progress: self.driver.progress(of: record), window: window,
                                           hostWait: waitsForHost ? self.hosts.hostWait(record.hostKey, now: now) : nil,
                                           space: shortage, urls: self.driver.urls)
            task.connections = self.driver.session.connections(of: record.key)
            if let waits = self.driver.contentStore?.executor.waitDescription(record.key) { task.state = "waiting-store"; task.waitingFor = waits }
            return task
        }, running: driver.running.count, summary: runState.summary,
           hooksRunning: hooks.running, hooksWaiting: hooks.waiting, outages: hosts.scheduler.hostOutages,
           watcher: runState.watcherTrouble,
           maxRate: driver.rateInForce > 0 || driver.rateChangesAt != nil ? (driver.rateInForce, driver.rateChangesAt) : nil)
        operators.metrics.changed()
    }

    /// The gauges from the last status report and the engine's parts, then the text if it changed.
    func writeMetrics(now: Date) {
        var snapshot = DaemonMetrics.Snapshot()
        snapshot.store = driver.contentStore.map { ($0.totals.entries, $0.totals.bytes) }
        if let d = operators.status.lastDaemon {
            snapshot.states = d.states ?? [:]
            snapshot.queued = d.queued
        }
        snapshot.running = driver.running.count
        snapshot.connections = hosts.scheduler.connectionsInUse
        snapshot.outages = operators.status.lastOutages
        snapshot.oldestQueued = operators.status.oldestQueued
        snapshot.maxRate = driver.rateInForce
        snapshot.hooksRunning = hooks.running
        snapshot.hooksWaiting = hooks.waiting
        operators.metrics.write(now: now, snapshot: snapshot, bytesReceived: driver.session.bodyBytesReceived)
    }
}
