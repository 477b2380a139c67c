import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// The engine's side of the content store (`ContentStoreRoom`, `--store`): starting a fetch (from
/// a hashed mirror first), falling through to the next source, the end of a copy from the store.
/// What a waiter does next is `StoreExecutor`'s (through `StoreShell`). Apart from the item
/// events so that the store's touch points in the engine stay a few calls.
extension Engine {
    /// The item's transfer starts (the content store, if any, decided it fetches): from
    /// `hashedMirror` (the store's first hashed mirror for it, or the next after one failed),
    /// else from its own source. The part the driver opened goes to the item's machine; then,
    /// if the start failed after opening it, the failure.
    func startFetch(_ record: ItemRecord, _ item: RequestItem, credentials: [RequestHeader], hashedMirror: String?) {
        var opened: RunningAttempt?
        do {
            try driver.start(record, item, credentials: credentials, hashedMirror: hashedMirror, opened: &opened)
            if let opened { executor.send(.partOpened(opened), to: record) }
        } catch {
            if let opened { executor.send(.partOpened(opened), to: record) }
            couldNotStart(record, StartProblem(errno: error.errno), "\(error)")
        }
    }

    /// A hashed mirror could not serve the item (`ContentStoreRoom.fallThrough`): what it left is
    /// dropped and the item asks `hashedMirror` (nil: its own source) in the same attempt.
    func fetchAgain(_ record: ItemRecord, hashedMirror: String?, credentials: [RequestHeader]) {
        guard let item = record.loaded else { return }
        record.partDiscarded()
        startFetch(record, item, credentials: credentials, hashedMirror: hashedMirror)
    }

    /// A fresh part for a body taken from the content store: unnamed (it never needs a staging
    /// name) unless a named part of an earlier attempt may be on disk, which only a named create replaces.
    func openFreshPart(_ record: ItemRecord) throws(StoreError) -> StagingFile {
        try store.openPart(record.base, fresh: true, unnamed: !record.hasStateFile && !store.partExists(record.base))
    }

    /// A hit's bytes were read and hashed (`ContentStoreRoom.copied`): the item goes on with the
    /// body when they hash to its digest; else it decides again as if the store had no entry
    /// (`StoreExecutor.hitFailed`: a waiter, which holds no slot, queues for one first).
    func storeCopied(key: Int, digest: String, read: ContentStoreRoom.HitRead) {
        let record = items.table.item(key)
        guard let contentStore = driver.contentStore,
              let credentials = contentStore.copied(record, key: key, digest: digest, read: read, send: { if let record { executor.send($0, to: record) } }),
              record?.loaded != nil else { return }
        contentStore.executor.hitFailed(key, credentials: credentials)
    }
}
