import Foundation
import SpoolCore
import Logging
import SpoolProcess
import SpoolWatcher

/// The loop's routing of what other threads post to the inbox: the watcher's arrivals,
/// listings and commands, the I/O queue's answers, hooks, signals, network changes, the content
/// store's ingests and copies; and the stop they may start.
extension Engine {
    func route(_ message: EngineMessage) {
        // The I/O queue's answers come wrapped: counted out by the queue, then routed as what
        // they carry (never wrapped twice).
        var message = message
        if case .ioDone(let answer) = message { message = io.answer(answer) }
        switch message {
        case .ioDone:
            preconditionFailure("an I/O answer wrapped twice")
        case .watcher(.arrived(let name)):
            claim(name)
        case .watcher(.listing(let names, let initial)):
            if !initial { logger.warning("inotify queue overflowed; rescanned incoming/", metadata: ["files": "\(names.count)"]) }
            intake.listed(names, initial: initial)
        case .watcher(.control(let name)):
            operators.control.handle(name, request: items.table.wakeRequest(named:), hosts: self,
                                     whole: { self.requestCommand($1, on: $0, caller: $2) }) { record, verb in
                // `retry` starts a waiting item now: the operator also wins over a 429/503 hold.
                if verb == .retry, record.phase == .retrying { hosts.scheduler.releaseHold(record.hostKey) }
                return !(executor.send(.operatorCommand(OperatorVerb(verb)), to: record) ?? []).isEmpty
            }
            operators.status.dirty = true
        case .watcher(.rescanned(let names)):
            intake.listed(names)
        case .watcher(.folderLost(let folder, let reason)):
            logger.error("watched folder lost; made again and watched again: \(reason)", metadata: ["folder": "\(folder)"])
            runState.watcherTrouble = "\(folder) was lost (\(reason)); made again"
            for directory in [store.layout.incoming, store.layout.control] where directory.path == folder {
                do { try directory.reopen() } catch { logger.error("could not open the watched folder again: \(error)") }
            }
            operators.status.dirty = true
        case .watcher(.stopped):
            runState.watcher = nil
            runState.drain.watch.watcherStopped()
        case .watcher(.failed(let reason)):
            logger.critical("watcher stopped: \(reason)")
            runState.watcherTrouble = "stopped: \(reason)"
            runState.summary.watcherFailed = true
            beginStop(reason: "watcher failed")
        case .published(let results):
            driver.contentStore?.published(results, item: items.table.item(forBase:), io: io)
            for (record, event) in publishing.batchEnded(results, item: items.table.item(forBase:)) { executor.send(event, to: record) }
        case .groupEnded(let name, let markerPath, let journal, let error):
            let drains = configuration.once || configuration.due
            if groupEnds.ended(name, markerPath: markerPath, journal: journal, error: error, drain: drains) {
                runState.summary.unended += 1
            }
        case .rejected(let request, let error):
            intake.rejectionFiled(request, error: error)
        case .uploadsRecorded(let results):
            for (record, event) in publishing.uploadsRecorded(results, item: items.table.item) { executor.send(event, to: record) }
        case .outgoingFiled(let name, let error):
            if let error { logger.warning("could not move a failed upload's file into failed/: \(error)", metadata: ["file": "\(name)"]) }
        case .groupHookFinished(let journal):
            hooks.groupHookFinished(journal)
        case .refreshEnded(let key, let attempt, let outcome, let line):
            operators.status.dirty = true
            if let record = items.table.item(key),
               let event = driver.refreshEnded(record, attempt: attempt, outcome: outcome, line: line) {
                executor.send(event, to: record)
            }
        case .itemHookFinished:
            break
        case .reload:
            reload()
        case .networkChanged(let routes, let addresses):
            let probed = hosts.scheduler.probeNow(Date())
            if !probed.isEmpty {
                logger.notice("the network changed; probing unreachable hosts now", metadata: [
                    "hosts": "\(probed.joined(separator: ","))", "new-routes": "\(routes)", "new-addresses": "\(addresses)"])
            }
        case .networkMonitorFailed(let why):
            logger.warning("stopped watching for network changes; unreachable hosts are probed on their back-off only: \(why)")
        case .storeIngested(let digest, let flight, let outcome, let evicted, let totals, let error):
            driver.contentStore?.ingested(digest: digest, flight: flight, outcome: outcome, evicted: evicted, totals: totals,
                                          error: error)
            operators.metrics.changed()
        case .storeCopied(let key, let digest, let read):
            storeCopied(key: key, digest: digest, read: read)
        case .stop(let signal):
            beginStop(reason: signal == SIGINT ? "SIGINT" : "SIGTERM")
        }
    }

    func beginStop(reason: String) {
        guard !runState.stopping else { return }
        runState.stopping = true
        logger.notice("stopping: no new claims; partial downloads are kept", metadata: ["reason": "\(reason)"])
        ServiceNotifier.notify("STOPPING=1")
        for record in Array(driver.running.values) { executor.send(.stop, to: record) }
        for key in driver.contentStore?.waitingKeys ?? [] { if let record = items.table.item(key) { executor.send(.stop, to: record) } }
    }
}
