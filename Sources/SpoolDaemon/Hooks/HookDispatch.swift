import Foundation
import SpoolCore
import SpoolConfiguration
import SpoolStore

/// The `--on-item` and `--on-group` hooks: which environment each gets, and the group hook's
/// exactly-once bookkeeping (its journal goes only after the hook has run).
///
/// A group hook runs while it holds its journal's lock (so no worker starting meanwhile runs it
/// again, see `SpoolStore.pendingGroupHooks`). At most `--max-hooks` group hooks are handed to
/// the runner at once; the others wait here by journal name, holding no descriptor: thousands of
/// groups ending behind a slow hook must not use up the open-file limit. A waiting hook's journal
/// is locked again when its turn comes, and the hook is skipped when that fails: another worker
/// has run it, or is running it, meanwhile.
final class HookDispatch {
    private let runner: HookRunner
    private let store: SpoolStore
    private let inbox: Inbox
    private var onItem: String?
    private var onGroup: String?
    private(set) var refreshHook: String?
    private var maxGroupHooks: Int
    /// Group hooks handed to the runner whose completion the engine has not handled yet.
    private var groupHooksStarted = 0
    /// Group hooks waiting for their turn, oldest first, from `nextWaiting` on.
    private var waitingGroups: [WaitingGroupHook] = []
    private var nextWaiting = 0

    private struct WaitingGroupHook {
        let journal: String
        let request: String
        let environment: [String: String]
    }

    init(runner: HookRunner, store: SpoolStore, inbox: Inbox, onItem: String?, onGroup: String?, refreshHook: String?,
         maxGroupHooks: Int) {
        self.runner = runner
        self.store = store
        self.inbox = inbox
        self.onItem = onItem
        self.onGroup = onGroup
        self.refreshHook = refreshHook
        self.maxGroupHooks = max(1, maxGroupHooks)
    }

    /// Group hooks started or waiting: a drain waits for them.
    var groupHooksOutstanding: Int { groupHooksStarted + waitingGroups.count - nextWaiting }

    /// Runs `--on-group` for an ended group, then drops its journal — so the hook runs once, and
    /// still runs after a crash that came between the group marker and the hook.
    func groupEnded(journal: HeldLock, markerPath: String, group: String, request: String, items: Int, failed: Int,
                    owner: String? = nil) {
        guard onGroup != nil else {
            store.groupHookDone(journal)
            return
        }
        let hook = WaitingGroupHook(journal: journal.name, request: request,
                                    environment: Self.groupEnvironment(markerPath: markerPath, group: group, request: request,
                                                                       items: items, failed: failed, owner: owner))
        if groupHooksStarted < maxGroupHooks && nextWaiting == waitingGroups.count {
            start(hook, holding: journal)
        } else {
            waitingGroups.append(hook)      // the lock goes with `journal`; taken again at its turn
            startWaiting()
        }
    }

    /// A group hook an earlier run did not get to (`SpoolStore.pendingGroupHooks`): it waits
    /// for its turn like any other. Without `--on-group` there is nothing to run: its journal goes.
    func groupPending(_ pending: PendingGroupHook) {
        guard onGroup != nil else {
            if let held = store.relockGroupJournal(pending.journal) { store.groupHookDone(held) }
            return
        }
        let request = pending.marker?.request ?? ""
        waitingGroups.append(WaitingGroupHook(journal: pending.journal, request: request,
                                              environment: Self.groupEnvironment(markerPath: pending.markerPath,
                                                                                 group: pending.marker?.group ?? "", request: request,
                                                                                 items: pending.marker?.items.count ?? 0,
                                                                                 failed: pending.marker?.failed ?? 0,
                                                                                 owner: pending.marker?.owner)))
        startWaiting()
    }

    /// The group hook has run: its journal can go, and the next waiting one may start.
    func groupHookFinished(_ journal: HeldLock) {
        groupHooksStarted -= 1
        store.groupHookDone(journal)
        startWaiting()
    }

    /// `owner`: the request's owner (`SPOOLFETCH_OWNER`), when known.
    private static func groupEnvironment(markerPath: String, group: String, request: String,
                                         items: Int, failed: Int, owner: String?) -> [String: String] {
        var environment = ["SPOOLFETCH_GROUP": group, "SPOOLFETCH_ID": request, "SPOOLFETCH_MARKER": markerPath,
                           "SPOOLFETCH_PATH": markerPath,
                           "SPOOLFETCH_STATUS": failed == 0 ? "published" : "failed",
                           "SPOOLFETCH_ITEMS": "\(items)", "SPOOLFETCH_FAILED": "\(failed)"]
        if let owner { environment["SPOOLFETCH_OWNER"] = owner }
        return environment
    }

    private func start(_ hook: WaitingGroupHook, holding journal: HeldLock) {
        guard let command = onGroup else {
            store.groupHookDone(journal)
            return
        }
        let inbox = self.inbox
        groupHooksStarted += 1
        runner.run(command, environment: hook.environment, item: hook.request, kind: "group") { _ in
            inbox.post(.groupHookFinished(journal: journal))
        }
    }

    /// Starts waiting group hooks while there is room, each once its journal is locked again.
    private func startWaiting() {
        while groupHooksStarted < maxGroupHooks, nextWaiting < waitingGroups.count {
            let hook = waitingGroups[nextWaiting]
            nextWaiting += 1
            if let journal = store.relockGroupJournal(hook.journal) { start(hook, holding: journal) }
        }
        if nextWaiting == waitingGroups.count {
            waitingGroups.removeAll(keepingCapacity: true)
            nextWaiting = 0
        } else if nextWaiting > 1024 && nextWaiting * 2 > waitingGroups.count {
            waitingGroups.removeFirst(nextWaiting)
            nextWaiting = 0
        }
    }

    /// Runs `--on-item` for an item that ended.
    func itemEnded(_ record: ItemRecord) {
        guard let command = onItem else { return }
        var environment = [
            "SPOOLFETCH_ID": record.id, "SPOOLFETCH_GROUP": record.request.group,
            "SPOOLFETCH_URL": record.url,
            "SPOOLFETCH_BYTES": "\(record.bytesOnDisk)",
            "SPOOLFETCH_OWNER": record.request.ownerName,
        ]
        if let finalURL = record.lastFacts?.finalURL { environment["SPOOLFETCH_FINAL_URL"] = finalURL }
        switch record.phase {
        case .published(let file, let marker):
            // `unchanged`: a 304 confirmed the file already published (`skip-unchanged`).
            environment["SPOOLFETCH_STATUS"] = record.summary.isUpload ? "uploaded" : record.endedUnchanged ? "unchanged" : "published"
            // An upload publishes no file: its record is both the path and the marker.
            environment["SPOOLFETCH_PATH"] = record.summary.isUpload ? marker : store.publishedPath(file)
            // Empty under `markers: group`: the file has no marker of its own, and the group
            // marker does not exist yet (the group hook gets its path).
            environment["SPOOLFETCH_MARKER"] = marker
            if let sha256 = record.upload.sha256 ?? record.publishedMarker?.sha256 ?? record.hash?.hexDigest {
                environment["SPOOLFETCH_SHA256"] = sha256
            }
        case .failed(let failure):
            environment["SPOOLFETCH_STATUS"] = "failed"
            environment["SPOOLFETCH_REASON"] = "\(failure.code): \(failure.message)"
            // A deadline's or a cancel's ending: what the item waited on or last failed with.
            if let cause = failure.cause {
                environment["SPOOLFETCH_CAUSE_CODE"] = cause.code
                if let host = cause.host { environment["SPOOLFETCH_CAUSE_HOST"] = host }
            }
        default:
            return
        }
        let inbox = self.inbox
        runner.run(command, environment: environment, item: record.id) { _ in inbox.post(.itemHookFinished) }
    }

    /// Runs `--refresh-hook` for a fresh URL for `record` (in its attempt `attempt`); the engine
    /// gets `.refreshEnded` with the hook's first stdout line.
    func refresh(_ record: ItemRecord, url: String, reason: String, refreshKey: String?, attempt: Int) {
        guard let command = refreshHook else { return }
        let environment = [
            "SPOOLFETCH_ID": record.id, "SPOOLFETCH_REQUEST": record.request.name, "SPOOLFETCH_GROUP": record.request.group,
            "SPOOLFETCH_URL": url, "SPOOLFETCH_REASON": reason, "SPOOLFETCH_REFRESH_KEY": refreshKey ?? "",
            "SPOOLFETCH_OWNER": record.request.ownerName,
        ]
        let inbox = self.inbox
        let key = record.key
        runner.runForAnswer(command, environment: environment, item: record.id) { outcome, line in
            inbox.post(.refreshEnded(key: key, attempt: attempt, outcome: outcome, line: line))
        }
    }

    /// Hooks running now and waiting for a slot.
    var running: Int { runner.running }
    var waiting: Int { runner.waiting }

    /// A reload: new commands and limits for hooks started from now on.
    func update(_ configuration: DaemonConfiguration) {
        onItem = configuration.onItem
        onGroup = configuration.onGroup
        refreshHook = configuration.refreshHook
        maxGroupHooks = max(1, configuration.maxHooks)
        runner.update(timeout: configuration.hookTimeout, maxRunning: configuration.maxHooks)
        startWaiting()
    }

    /// At shutdown: blocks until every queued hook has run.
    func waitForAll() { runner.waitForAll() }
}
