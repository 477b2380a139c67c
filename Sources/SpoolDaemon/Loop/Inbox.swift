import Foundation
import SpoolCore
import Synchronization
import SpoolStore
import SpoolWatcher

/// A message to the engine thread from another thread.
indirect enum EngineMessage: Sendable {
    /// The answer of a job the I/O queue ran (see `IOQueue`).
    case ioDone(EngineMessage)
    case watcher(WatcherEvent)
    case published([PublishResult])
    case groupEnded(request: String, markerPath: String?, journal: HeldLock?, error: StoreError?)
    case rejected(request: String, error: StoreError?)
    /// A batch of upload records was written (each its `marker`) or could not be (`error`).
    case uploadsRecorded([UploadRecorded])
    /// A failed upload's file was moved into `failed/` (or could not be).
    case outgoingFiled(name: String, error: StoreError?)
    /// A group hook has run: its group journal can go.
    case groupHookFinished(journal: HeldLock)
    /// An item hook has ended (the loop wakes to update status and to let a drain end).
    case itemHookFinished
    /// The refresh hook asked for item `key` in its attempt `attempt` has ended; `line` is its
    /// first stdout line.
    case refreshEnded(key: Int, attempt: Int, outcome: HookRunner.Outcome, line: String?)
    /// A published body went into the content store (or could not); `evicted`: entries removed for `--store-max`.
    /// `totals`: the store's entries and bytes, when the job listed it (after an eviction).
    /// `flight`: the item whose fetch of the digest this ingest ends; nil when the body was not
    /// that fetch's (an adopted item's, published while another item fetches the digest).
    case storeIngested(digest: String, flight: Int?, outcome: ContentStore.IngestOutcome?, evicted: Int, totals: StoreTotals?,
                       error: StoreError?)
    /// A content-store hit of item `key` was read on the store's copy thread: the bytes to publish
    /// and the SHA-256 computed from them, or why they could not be read.
    case storeCopied(key: Int, digest: String, read: ContentStoreRoom.HitRead)
    case stop(signal: Int32)
    /// SIGHUP: read the configuration file again.
    case reload
    /// A route or an address appeared (rtnetlink): probe unreachable hosts now.
    case networkChanged(routes: Int, addresses: Int)
    case networkMonitorFailed(String)
}

/// The only way into the engine thread: a small locked queue plus a wake-up of the transfer
/// loop's `curl_multi_poll`. The lock is held only to append or to swap the array out.
///
/// `posted` counts what was posted and not yet drained, so that a turn with nothing posted
/// (most turns of a running transfer) takes no lock. It is raised after the append and before
/// the wake-up: a drain that reads 0 while a post is under way is followed by that post's
/// wake-up, and the next turn takes the message.
final class Inbox: Sendable {
    private let messages = Mutex<[EngineMessage]>([])
    private let posted = Atomic<Int>(0)
    /// Wakes the loop's `curl_multi_poll` (once the session exists).
    private let target: WakeTarget

    init(wake target: WakeTarget) { self.target = target }

    func post(_ message: EngineMessage) {
        messages.withLock { $0.append(message) }
        posted.add(1, ordering: .releasing)
        target.wake()
    }

    func drain() -> [EngineMessage] {
        if posted.load(ordering: .acquiring) == 0 { return [] }
        let taken = messages.withLock { m in
            let taken = m
            m.removeAll(keepingCapacity: true)
            return taken
        }
        posted.subtract(taken.count, ordering: .relaxed)
        return taken
    }
}

/// The content store's size as last counted: entries and bytes.
struct StoreTotals: Sendable, Hashable {
    var entries: Int
    var bytes: Int64
}
