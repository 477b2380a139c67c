import Foundation
import SpoolCore
import Logging
import SpoolProcess
import SpoolStore
import SpoolTransfer
import SpoolWatcher
import SpoolNetwork

extension Engine {
    /// The start-up sequence, in the order that keeps it safe:
    ///
    /// 1. the watcher thread first — libinotifytools waits in `select()`, which cannot watch a
    ///    descriptor ≥ 1024, so its inotify fd must be among the process's first (only the
    ///    spool's folders and the transfer session, a handful, are opened before it, by `init`);
    /// 2. the signal handlers;
    /// 3. the worker registration: alone, every temp file is a crash's leftover; beside live
    ///    workers only old ones are, so only those are swept;
    /// 4. what group ends of an earlier run did not get to (their items' staging files, their
    ///    hooks), then adoption of dead workers' requests;
    /// 5. `READY=1` to systemd. Requests already in `incoming/` arrive as the watcher's first listing.
    func startUp() throws(DaemonError) -> DirectoryWatcher {
        let inbox = self.inbox
        let watcher = DirectoryWatcher(directory: store.layout.incoming.path, controlDirectory: store.layout.control.path,
                                       rescanInterval: configuration.rescanInterval > 0 ? configuration.rescanInterval : nil,
                                       usesInotify: configuration.inotify) {
            inbox.post(.watcher($0))
        }
        do { try watcher.start() } catch { throw .watcher(error) }

        do {
            try StopSignals.install(post: { inbox.post(.stop(signal: $0)) }, reload: { inbox.post(.reload) })
        } catch {
            throw .signals(error)
        }

        store.setLease(LeaseSettings(period: configuration.leasePeriod, timeout: configuration.leaseTimeout))
        let registration: WorkerRegistration
        do { registration = try WorkerRegistration(layout: store.layout) } catch { throw .spool(error) }
        runState.registration = registration
        // The locks may lie (a network filesystem granting them per machine): alone only when
        // no other worker's lease is alive either.
        let alone = registration.alone && store.noOtherWorkerAlive()
        let swept = alone ? store.sweepTemporaries() : store.sweepTemporaries(olderThan: 3600)
        if swept > 0 { logger.info("removed temporary files left by an earlier run", metadata: ["count": "\(swept)"]) }
        let leftovers = store.removeStagingOfEndedGroups()
        if leftovers > 0 {
            logger.notice("removed staging files of requests whose group had ended (a crash or power cut cut its end short)",
                          metadata: ["count": "\(leftovers)"])
        }
        for pending in store.pendingGroupHooks() {
            logger.notice("running the group hook an earlier run did not get to", metadata: ["marker": "\(pending.markerPath)"])
            hooks.groupPending(pending)
        }
        intake.adoptOrphans(alone: alone)
        // Network changes (a route or address appears) probe unreachable hosts at once. Without
        // rtnetlink the probes keep their back-off: worth a warning, not a refusal to start.
        let monitor = NetworkChangeMonitor(onChange: { inbox.post(.networkChanged(routes: $0.newRoutes, addresses: $0.newAddresses)) },
                                           onFailure: { inbox.post(.networkMonitorFailed("\($0)")) })
        do { try monitor.start(); runState.networkMonitor = monitor } catch {
            logger.warning("not watching for network changes; unreachable hosts are probed on their back-off only: \(error)")
        }
        registration.endStartUp()
        intake.scheduleAdoptions(every: configuration.adoptInterval, now: Date())
        logFilesystemMethods()
        ServiceNotifier.notify("READY=1\nSTATUS=watching \(store.layout.incoming.path)")
        logger.info("spoolfetch running", metadata: [
            "spool": "\(store.layout.root)", "final": "\(store.layout.final.path)", "once": "\(configuration.once)",
            "concurrency": "\(configuration.concurrency)", "per-host": "\(configuration.perHost)",
            "open-files": "\(runState.descriptors.limit)"])
        warnAboutLooseFolders()
        if runState.descriptors.openItems < configuration.concurrency {
            logger.warning("the open-file limit allows fewer transfers than --concurrency; raise it (LimitNOFILE= in the unit, ulimit -n) for more",
                           metadata: ["open-files": "\(runState.descriptors.limit)", "transfers": "\(runState.descriptors.openItems)",
                                      "concurrency": "\(configuration.concurrency)"])
        }
        return watcher
    }

    /// Once at start, one line per folder: a folder no producer may write (the root, `active/`,
    /// `staging/`, the store, `done/`, `failed/`, `rejected/`, the final folder) that its group
    /// or others may write — a producer could forge a marker there, or swap a folder for a
    /// symlink. `spoolfetch init` tightens them.
    private func warnAboutLooseFolders() {
        let layout = store.layout
        for (path, mode) in SpoolOwnership.looseFolders(root: layout.root, final: layout.final.path,
                                                        store: configuration.storePath) {
            logger.warning("a folder producers must not write is writable by its group or others: a producer could forge or remove what the daemon writes there; run spoolfetch init (README: A spool for several producers)",
                           metadata: ["folder": "\(path)", "mode": "\(SpoolAccounts.modeText(mode))"])
        }
    }

    /// Once at start: which rename and sync method each folder uses, and where space cannot be
    /// reserved (a filesystem that reports no size).
    private func logFilesystemMethods() {
        for folder in store.layout.folderTraits() {
            let meta: Logger.Metadata = ["folder": "\(folder.path)", "rename": "\(folder.renameMethod)",
                                         "sync": "\(folder.syncMethod)"]
            switch folder.renameMethod {
            case .renameNoReplace: logger.info("filesystem methods for \(folder.role)", metadata: meta)
            case .linkThenUnlink: logger.notice("renames out of \(folder.role) use link+unlink (the filesystem takes no rename flags)", metadata: meta)
            case .unsupported: logger.error("\(folder.role) is on a filesystem with neither rename flags nor hard links: moves out of it will fail", metadata: meta)
            }
            if !folder.spaceIsKnown {
                logger.notice("space reservation is off for \(folder.path): its filesystem does not report its size", metadata: meta)
            }
        }
    }
}
