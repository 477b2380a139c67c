import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// The engine's side of the content store (`ContentStoreRoom`, `--store`): starting a fetch (from
/// a hashed mirror first), falling through to the next source, the end of a copy from the store,
/// the end of a wait for another item's fetch. Apart from the item events so that the store's
/// touch points in the engine stay a few calls.
extension Engine {
    /// The item's transfer starts (the content store, if any, decided it fetches): from its first
    /// hashed mirror when it has one, else from its own source.
    func startFetch(_ record: ItemRecord, _ item: RequestItem, credentials: [RequestHeader]) {
        let mirror = driver.contentStore?.firstSource(record, item, credentials: credentials)
        do {
            try driver.start(record, item, credentials: credentials, hashedMirror: mirror) { part in executor.send(.partOpened(part), to: record) }
        } catch {
            couldNotStart(record, StartProblem(errno: error.errno), "\(error)")
        }
    }

    /// A hashed mirror could not serve the item (`ContentStoreRoom.fallThrough`): what it left is
    /// dropped and the item asks `hashedMirror` (nil: its own source) in the same attempt.
    func fetchAgain(_ record: ItemRecord, hashedMirror: String?, credentials: [RequestHeader]) {
        guard let item = record.loaded else { return }
        record.partDiscarded()
        do {
            try driver.start(record, item, credentials: credentials, hashedMirror: hashedMirror) { part in executor.send(.partOpened(part), to: record) }
        } catch {
            couldNotStart(record, StartProblem(errno: error.errno), "\(error)")
        }
    }

    /// A fresh part for a body taken from the content store: unnamed (it never needs a staging
    /// name) unless a named part of an earlier attempt may be on disk, which only a named create replaces.
    func openFreshPart(_ record: ItemRecord) throws(StoreError) -> StagingFile {
        try store.openPart(record.base, fresh: true, unnamed: !record.hasStateFile && !store.partExists(record.base))
    }

    /// A hit's bytes were read and hashed (`ContentStoreRoom.copied`): the item goes on with the
    /// body when they hash to its digest; else it decides again as if the store had no entry (it
    /// fetches, claimed, or waits for a fetch of the digest). A waiter whose turn was a hit holds
    /// no connection slot (`Scheduler.park`): it queues for one first and decides once it has it.
    func storeCopied(key: Int, digest: String, read: ContentStoreRoom.HitRead) {
        let record = items.table.item(key)
        guard let contentStore = driver.contentStore,
              let credentials = contentStore.copied(record, key: key, digest: digest, read: read, send: { if let record { executor.send($0, to: record) } }),
              let record, let item = record.loaded else { return }
        if hosts.scheduler.isParked(record.key) { return askForSlot(record, credentials: credentials) }
        if contentStore.start(record, item, credentials: credentials, send: { executor.send($0, to: record) },
                              openPart: { () throws(StoreError) in try openFreshPart(record) }) {
            if contentStore.isWaiting(record.key) { hosts.scheduler.park(record.key) }
            return
        }
        startFetch(record, item, credentials: credentials)
    }

    /// A waiting item's turn came (`ContentStoreRoom.check`): published from the store, or fetched.
    /// A waiter holds no connection (`Scheduler.park`): one that has to fetch asks the scheduler
    /// for a slot first and goes on in `storeSlotGranted`; one that waits again gives its slot back.
    func storeWaitEnded(_ record: ItemRecord, _ decision: StoreDecision, credentials: [RequestHeader]) {
        guard let contentStore = driver.contentStore, let item = record.loaded, let digest = ContentStoreRoom.digest(of: item) else { return }
        let parked = hosts.scheduler.isParked(record.key)
        switch decision {
        case .hit:
            if contentStore.publishFromStore(record, digest: digest, send: { executor.send($0, to: record) },
                                             openPart: { () throws(StoreError) in try openFreshPart(record) },
                                             credentials: credentials) { return }
            if parked { return askForSlot(record, credentials: credentials) }
            startFetch(record, item, credentials: credentials)
        case .fetch(_, let breaking):
            if parked { return askForSlot(record, credentials: credentials) }
            switch contentStore.beginFetch(record, digest: digest, breaking: breaking, credentials: credentials) {
            case .fetch:
                startFetch(record, item, credentials: credentials)
            case .inStore:
                if !contentStore.publishFromStore(record, digest: digest, send: { executor.send($0, to: record) },
                                                  openPart: { () throws(StoreError) in try openFreshPart(record) },
                                                  credentials: credentials) {
                    startFetch(record, item, credentials: credentials)
                }
            case .waiting:
                hosts.scheduler.park(record.key)
            }
        case .wait:
            hosts.scheduler.park(record.key)
        }
        operators.status.dirty = true
    }

    /// A parked waiter has to fetch: it queues for a connection like any item (still running,
    /// still shown waiting), and decides again once it has one.
    private func askForSlot(_ record: ItemRecord, credentials: [RequestHeader]) {
        driver.contentStore?.awaitSlot(record.key, credentials: credentials)
        hosts.scheduler.unpark(record.key)
    }

    /// The scheduler started `key`: true when it is a waiter that asked for a slot (`askForSlot`),
    /// which now decides again with the slot in hand; false for any other item.
    func storeSlotGranted(_ key: Int) -> Bool {
        guard let contentStore = driver.contentStore, let credentials = contentStore.slotGranted(key) else { return false }
        guard let record = items.table.item(key), record.phase == .running, let item = record.loaded else {
            hosts.scheduler.finished(key)
            return true
        }
        storeWaitEnded(record, contentStore.decide(record, item), credentials: credentials)
        return true
    }
}
