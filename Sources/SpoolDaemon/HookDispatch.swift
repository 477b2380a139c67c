import Foundation
import SpoolStore

/// The `--on-item` and `--on-group` hooks: which environment each gets, and the group hook's
/// exactly-once bookkeeping (its journal goes only after the hook has run).
final class HookDispatch {
    private let runner: HookRunner
    private let store: SpoolStore
    private let inbox: Inbox
    private var onItem: String?
    private var onGroup: String?
    /// Group hooks started whose completion the engine has not handled yet.
    private(set) var groupHooksOutstanding = 0

    init(runner: HookRunner, store: SpoolStore, inbox: Inbox, onItem: String?, onGroup: String?) {
        self.runner = runner
        self.store = store
        self.inbox = inbox
        self.onItem = onItem
        self.onGroup = onGroup
    }

    /// Runs `--on-group` for an ended group, then drops its journal — so the hook runs once, and
    /// still runs after a crash that came between the group marker and the hook.
    func groupEnded(journal: HeldLock, markerPath: String, group: String, request: String, items: Int, failed: Int) {
        guard let command = onGroup else {
            store.groupHookDone(journal)
            return
        }
        let inbox = self.inbox
        runner.run(command, environment: [
            "SPOOLFETCH_GROUP": group, "SPOOLFETCH_ID": request, "SPOOLFETCH_MARKER": markerPath,
            "SPOOLFETCH_PATH": markerPath,
            "SPOOLFETCH_STATUS": failed == 0 ? "published" : "failed",
            "SPOOLFETCH_ITEMS": "\(items)", "SPOOLFETCH_FAILED": "\(failed)",
        ], item: request) { _ in inbox.post(.groupHookFinished(journal: journal)) }
        groupHooksOutstanding += 1
    }

    /// The group hook has run: its journal can go.
    func groupHookFinished(_ journal: HeldLock) {
        groupHooksOutstanding -= 1
        store.groupHookDone(journal)
    }

    /// Runs `--on-item` for an item that ended.
    func itemEnded(_ record: ItemRecord) {
        guard let command = onItem else { return }
        var environment = [
            "SPOOLFETCH_ID": record.id, "SPOOLFETCH_GROUP": record.request.group,
            "SPOOLFETCH_URL": record.url,
            "SPOOLFETCH_BYTES": "\(record.bytesOnDisk)",
        ]
        if let finalURL = record.lastFacts?.finalURL { environment["SPOOLFETCH_FINAL_URL"] = finalURL }
        switch record.phase {
        case .published(let file, let marker):
            // `unchanged`: a 304 confirmed the file already published (`skip-unchanged`).
            environment["SPOOLFETCH_STATUS"] = record.endedUnchanged ? "unchanged" : "published"
            environment["SPOOLFETCH_PATH"] = store.publishedPath(file)
            // Empty under `markers: group`: the file has no marker of its own, and the group
            // marker does not exist yet (the group hook gets its path).
            environment["SPOOLFETCH_MARKER"] = marker
            if let sha256 = record.publishedMarker?.sha256 ?? record.hash?.hexDigest { environment["SPOOLFETCH_SHA256"] = sha256 }
        case .failed(let failure):
            environment["SPOOLFETCH_STATUS"] = "failed"
            environment["SPOOLFETCH_REASON"] = "\(failure.code): \(failure.message)"
        default:
            return
        }
        let inbox = self.inbox
        runner.run(command, environment: environment, item: record.id) { _ in inbox.post(.itemHookFinished) }
    }

    /// Hooks running now and waiting for a slot.
    var running: Int { runner.running }
    var waiting: Int { runner.waiting }

    /// A reload: new commands and limits for hooks started from now on.
    func update(_ configuration: DaemonConfiguration) {
        onItem = configuration.onItem
        onGroup = configuration.onGroup
        runner.update(timeout: configuration.hookTimeout, maxRunning: configuration.maxHooks)
    }

    /// At shutdown: blocks until every queued hook has run.
    func waitForAll() { runner.waitForAll() }
}
