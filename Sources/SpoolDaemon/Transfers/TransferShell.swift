import Foundation
import SpoolCore
import SpoolStore
import SpoolTransfer

/// The daemon's ports for the core's `TransferBook` (the transfer driver's bookkeeping): an item
/// is its `ItemRecord`, a part's step is `Partial`'s through the record, a state is written by
/// `ResumeStates`, the space rules are `SpaceGate`'s, a host's answer goes to `Hosts` and a
/// hashed mirror's failure to the content store. The decisions are the book's; here is only
/// what carries them out, so that the simulator, giving the book its own ports, runs the same
/// rules.
final class TransferShell: TransferBookPorts {
    typealias Record = ItemRecord
    typealias Facts = ResponseFacts
    typealias Hash = HashState

    /// Not owned: the driver owns the book, which owns this.
    unowned let driver: TransferDriver
    /// The engine, for the rooms beyond the driver (hosts, space, the content store's fetch
    /// again); set by the engine once it is made. Not owned: the engine owns the driver.
    weak var engine: Engine?

    /// The part a stopped transfer wrote: the item has left its running phase, which held it
    /// (set by `TransferDriver.stop` around the book's `stopped`).
    var stoppedPart: StagingFile?

    init(driver: TransferDriver) { self.driver = driver }

    func keep(_ record: ItemRecord, _ step: PartKeep, hash: HashState?) {
        driver.states.transferEnded(record.key)
        record.partKept(bytes: step.bytes, hash: hash,
                        validators: step.adoptsValidators ? (step.etag, step.lastModified) : nil)
        if let ranges = step.ranges {
            // A segmented transfer stopped: its ranges stay in the part, the next start fetches
            // only what is missing of them (`saveResumeState` syncs them and records them).
            record.partKeptRanges(ranges)
        } else if step.cutBack, let part = stoppedPart ?? record.part {
            // Ranges past the in-order prefix go: nothing may build on them. Should this fail,
            // the next start cuts the part back to the prefix anyway.
            try? part.truncate(to: step.bytes)
        }
    }


    func held(_ record: ItemRecord) -> PartHeld {
        let part = record.part
        return PartHeld(validator: record.validator, wantedSHA256: record.loaded?.sha256, expectedBytes: record.expectedBytes,
                        hasStateFile: record.hasStateFile, partNamed: part?.isNamed ?? false, partOpen: part != nil)
    }

    func tooLargeHint(_ record: ItemRecord) -> String? { record.loaded.flatMap(driver.requests.tooLargeHint) }

    func digest(_ hash: HashState) -> String { hash.hexDigest }

    func unchanged(_ record: ItemRecord) -> UnchangedFile? { driver.requests.conditional.notModified(record) }

    func neverFits(body: Int64?) -> String? { engine?.space.never(body: body) }

    func announce(_ record: ItemRecord, bytes: Int64) { record.noteAnnounced(bytes: bytes) }

    func fallsThrough(_ record: ItemRecord, _ end: TransferEnd) -> Bool {
        guard let engine, let (next, credentials) = driver.contentStore?.fallThrough(record, end) else { return false }
        engine.fetchAgain(record, hashedMirror: next, credentials: credentials)
        return true
    }

    /// `Hosts.answered`; a host reachable again changes the status report.
    func hostAnswered(_ record: ItemRecord, _ facts: ResponseFacts, ended: Bool) -> Bool {
        guard let engine else { return false }
        let answer = engine.hosts.answered(record, facts, ended: ended, now: Date())
        if answer.reachableAgain { engine.operators.status.dirty = true }
        return answer.free
    }

    func bodyBegan(_ record: ItemRecord, etag: String?, lastModified: String?, restartedFromZero: Bool) {
        if restartedFromZero {
            driver.logger.info("server sent the whole body again; starting over", metadata: ["item": "\(record.id)"])
        }
        record.partBodyBegan(etag: etag, lastModified: lastModified, restartedFromZero: restartedFromZero)
    }

    func nameForResume(_ record: ItemRecord) -> Bool {
        guard let part = record.part else { return false }
        return driver.states.nameForResume(record, part)
    }

    func writeResumeState(_ record: ItemRecord, bytes: Int64, synced: Int64) {
        guard let part = record.part else { return }
        driver.states.writeRunning(record, part, bytes: bytes, synced: synced)
    }
}

extension TransferReport where Facts == ResponseFacts, Hash == HashState {
    /// The book's facts of a download's outcome. `failure`: the outcome's, as the driver names it
    /// (a client certificate's failure names its credentials file); `partOpen`: the part the
    /// transfer wrote is still open.
    @_transparent init(_ outcome: TransferOutcome, failure: TransferFailure?, partOpen: Bool) {
        let facts = outcome.facts
        var noRoom: NoRoom? = nil
        if case .noRoom(let never, let why)? = failure { noRoom = never ? .never(why) : .later }
        self.init(key: outcome.key, fault: failure.map { TransferFault($0, serverError: facts.serverError) }, status: facts.httpStatus,
                  sha256: outcome.sha256, bytesInOrder: outcome.bytesOnDisk, hash: outcome.hashState, etag: facts.etag,
                  lastModified: facts.lastModified, rangeTotal: facts.rangeTotal, contentLength: facts.contentLength,
                  retryAfter: facts.retryAfter, keptRanges: outcome.keptRanges, partHasMore: outcome.partHasMore, noRoom: noRoom,
                  outage: outcome.isOutage, partOpen: partOpen, facts: facts)
    }
}
