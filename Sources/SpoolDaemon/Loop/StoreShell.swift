import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// The daemon's ports for `StoreExecutor` (the content store's shell rules, held by
/// `ContentStoreRoom`): the item table's records, the store's entries and claims files, the copy
/// thread (`ContentStoreRoom.publishFromStore`), the engine's fetch start, the scheduler's
/// park, and the logger. No rule here: which port is asked when is the executor's, as under the
/// simulator (`SimStorePorts`).
final class StoreShell: StorePorts {
    typealias Key = Int
    typealias Credentials = [RequestHeader]
    typealias Holder = StoreClaims.Holder

    /// Not owned: the engine owns the room, which owns the executor, which owns this.
    unowned let engine: Engine
    unowned let room: ContentStoreRoom

    init(engine: Engine, room: ContentStoreRoom) {
        self.engine = engine
        self.room = room
    }

    private func record(_ key: Int) -> ItemRecord? { engine.items.table.item(key) }

    // MARK: The items

    func digest(of key: Int) -> String? { record(key)?.loaded.flatMap(ContentStoreRoom.digest(of:)) }
    func name(of key: Int) -> String { record(key)?.id ?? "?" }
    func isRunning(_ key: Int) -> Bool { record(key)?.phase == .running }
    func keepsFetch(_ key: Int) -> Bool {
        let phase = record(key)?.phase
        return phase == .running || phase == .publishing || phase == .waitingToPublish
    }

    // MARK: The store and its claims

    func entry(_ digest: String) -> StoreEntryLook {
        guard room.store.contains(digest) else { return .absent }
        return room.distrusted.contains(digest) ? .distrusted : .present
    }

    func claimHolder(_ digest: String) -> StoreClaims.Holder? { room.claims.holder(digest) }

    func claim(_ digest: String, by key: Int) -> StoreClaimAnswer<StoreClaims.Holder> {
        do {
            switch try room.claims.claim(digest, item: name(of: key)) {
            case .claimed: return .claimed
            case .heldBy(let holder): return .heldBy(holder)
            }
        } catch {
            return .failed(reason: "\(error)")
        }
    }

    func breakClaim(_ digest: String, seen: StoreClaims.Holder) -> Bool { room.claims.breakClaim(digest, seen: seen) }
    func releaseClaim(_ digest: String) { room.claims.release(digest) }
    func refreshClaim(_ digest: String) { room.claims.refresh(digest) }

    // MARK: Starts

    func fetch(_ key: Int, credentials: [RequestHeader]) {
        guard let record = record(key), let item = record.loaded else { return }
        engine.startFetch(record, item, credentials: credentials,
                          hashedMirror: engine.driver.contentStore?.firstSource(record, item, credentials: credentials))
    }

    func readHit(_ key: Int, digest: String, credentials: [RequestHeader]) -> Bool {
        guard let record = record(key) else { return false }
        let engine = engine
        return room.publishFromStore(record, digest: digest, send: { engine.executor.send($0, to: record) },
                                     openPart: { () throws(StoreError) in try engine.openFreshPart(record) }, credentials: credentials)
    }

    // MARK: The scheduler

    func park(_ key: Int) { engine.hosts.scheduler.park(key) }
    func unpark(_ key: Int) { engine.hosts.scheduler.unpark(key) }
    func isParked(_ key: Int) -> Bool { engine.hosts.scheduler.isParked(key) }
    func slotUnused(_ key: Int) { engine.hosts.scheduler.finished(key) }

    // MARK: The clock and the log

    var now: Date { Date() }
    var monotonic: Double { ProcessInfo.processInfo.systemUptime }
    func checkDue() { room.saveCounters() }

    func note(_ note: StoreNote<Int>) {
        let logger = room.logger
        switch note {
        case .waits(let key, let digest, let by):
            logger.debug("waiting for another fetch of the same sha256", metadata: ["item": "\(name(of: key))", "sha256": "\(digest)", "fetched-by": "\(by)"])
        case .tookOverStaleClaim(let key, let digest, let holder):
            logger.warning("took over a stale store claim", metadata: ["item": "\(name(of: key))", "sha256": "\(digest)", "holder": "\(holder)"])
        case .claimFailed(let key, let reason):
            // The store's claims folder unusable: fetch anyway (at worst twice), say why.
            logger.warning("could not claim a digest in the store; fetching without a claim: \(reason)", metadata: ["item": "\(name(of: key))"])
        case .fetchEndedWithoutBody(let item, _):
            logger.debug("a fetch for the store ended without its body; the next waiter fetches", metadata: ["item": "\(item)"])
        case .fetches, .queuesForSlot:
            break
        }
    }
}

extension StoreClaims.Holder: StoreClaimHolding {}
