import Foundation
import SpoolCore
import Logging
import SpoolConfiguration
import SpoolScheduler

extension Engine {
    /// SIGHUP: reads the configuration file again (flags given at start stay on top) and applies
    /// what can change at run time — limits, rates, retries, the window, hooks, the log level —
    /// to what starts from now on. Settings that take a restart (the spool, the final folder,
    /// TLS trust, the stall timeout) are logged, not applied. An unreadable or invalid file
    /// changes nothing.
    func reload() {
        let result: ConfigurationReload
        do {
            result = try configuration.reloaded()
        } catch {
            logger.error("SIGHUP: the configuration could not be read again; nothing changed: \(error)")
            return
        }
        if result.isEmpty {
            logger.notice("SIGHUP: configuration read again; nothing changed")
            return
        }
        for change in result.needsRestart {
            logger.warning("SIGHUP: this setting takes a restart; not applied", metadata: [
                "key": "\(change.key)", "running": "\(change.old)", "file": "\(change.new)"])
        }
        guard !result.applied.isEmpty else { return }
        let next = result.configuration
        configuration = next
        logger.logLevel = next.loggerLevel
        items.reconfigure(next)
        hosts.reconfigure(next)
        driver.update(next)
        if let problem = SpaceGate.impossibleMinFree(next.minFree, layout: store.layout) {
            logger.error("SIGHUP: \(problem); min-free stays \(space.minFree.map { "\($0)" } ?? "auto")")
        } else {
            space.minFree = next.minFree
        }
        intake.update(maxItems: next.maxItems, maxRequestBytes: Int(clamping: next.maxRequestBytes))
        hooks.update(next)
        operators.metrics.update(path: next.metricsFile, interval: next.metricsInterval)
        driver.contentStore?.update(hashedMirrors: next.hashedMirrors)
        driver.contentStore?.update(maxBytes: next.storeMax)
        intake.rescheduleAdoptions(every: next.adoptInterval, now: Date())
        for change in result.applied {
            logger.notice("SIGHUP: setting changed", metadata: [
                "key": "\(change.key)", "old": "\(change.old)", "new": "\(change.new)"])
        }
        operators.status.dirty = true
    }
}
