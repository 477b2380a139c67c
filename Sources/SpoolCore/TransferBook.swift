import Foundation

/// The ports through which `TransferBook` reaches the items it keeps and the rooms a transfer's
/// end concerns: the part's steps and resume states (the daemon's `ItemRecord`, `Partial` and
/// `ResumeStates`; the simulator's parts), the space rules, the content store's hashed mirrors
/// and the hosts. The daemon gives the book `TransferShell`; the simulator `SimTransferPorts`.
public protocol TransferBookPorts: AnyObject {
    /// An item whose transfer runs (the daemon's record).
    associatedtype Record: AnyObject
    /// The adapter's own facts of a response, handed back to `hostAnswered`.
    associatedtype Facts
    /// The running hash of a part's bytes.
    associatedtype Hash

    /// The item's transfer left the session (what was kept about it while it ran, its
    /// segments, goes), and the part's step (`PartKeep`), with the hash of its bytes.
    func keep(_ record: Record, _ step: PartKeep, hash: Hash?)
    /// What the item holds, read after the part's step.
    func held(_ record: Record) -> PartHeld
    /// What a `too-large` failure's message gets appended (the limit came from
    /// `expected-bytes` × slack); asked only for that failure.
    func tooLargeHint(_ record: Record) -> String?
    /// The hex sha256 of the bytes `hash` covers.
    func digest(_ hash: Hash) -> String
    /// A 304 answered a conditional fetch (`on-exists: skip-unchanged`): the existing file, when
    /// the attempt asked on one (its empty part is removed); nil when it did not ask.
    func unchanged(_ record: Record) -> UnchangedFile?
    /// Why a body of `body` bytes can never fit (nil: it may, or its length is unknown).
    func neverFits(body: Int64?) -> String?
    /// The item waits for room with this size (a body cut for room before it was written).
    func announce(_ record: Record, bytes: Int64)
    /// A hashed mirror could not serve the item: true when the port started it again from its
    /// next source (the end is not the machine's).
    func fallsThrough(_ record: Record, _ end: TransferEnd) -> Bool
    /// Something of the item's host answered (`ended`: at the transfer's end); true when it was
    /// a paced host's refusal, which costs no attempt.
    func hostAnswered(_ record: Record, _ facts: Facts, ended: Bool) -> Bool
    /// A response's body began: its validators are the part's from now on.
    func bodyBegan(_ record: Record, etag: String?, lastModified: String?, restartedFromZero: Bool)
    /// Gives the part its staging name so that a restart finds it; false when that failed.
    func nameForResume(_ record: Record) -> Bool
    /// Writes the item's `B.state` (phase running): `bytes` of its part, `synced` of them synced.
    func writeResumeState(_ record: Record, bytes: Int64, synced: Int64)
}

/// The transfer driver's bookkeeping, pure: which transfers run (`running`), what a transfer's
/// end or stop leaves in the item's part, the `TransferEnd` its machine is told (a 304 that ends
/// it, a 416 whose total is the part's bytes, a body that can never fit, a paced refusal), one
/// answer of its host per end, and when a resume state is written (a large body's start, a
/// checkpoint). Its own owner in the core so that the seeds run these rules as the daemon runs
/// them: the daemon's `TransferDriver` reports its session's outcomes here through
/// `TransferShell`, the simulator its simulated servers' (no copy of the rules in the test).
/// Engine thread only. Called per transfer end, body start and checkpoint, never per byte.
public final class TransferBook<Ports: TransferBookPorts> {
    public typealias Record = Ports.Record
    public typealias Report = TransferReport<Ports.Facts, Ports.Hash>

    public let ports: Ports
    /// Items whose transfer is in the session, by key.
    public var running: [Int: Record] { table }
    @usableFromInline var table: [Int: Record] = [:]

    /// Bodies smaller than this are simply fetched again after a crash: no `B.state` is written
    /// when they begin.
    public static var resumeStateThreshold: Int64 { 1 << 20 }
    /// A body of unknown length cut for room waits until this much more than it holds is free.
    public static var unsizedStep: Int64 { 1 << 20 }

    public init(ports: Ports) { self.ports = ports }

    // Inlinable: SpoolDaemon specialises the book for its `TransferShell` (as `ItemExecutor`).

    /// The item's transfer is in the session now.
    @inlinable public func started(_ key: Int, _ record: Record) { table[key] = record }

    /// The item's transfer left the session with nothing for the book to decide (an upload's).
    @inlinable @discardableResult
    public func forget(_ key: Int) -> Record? { table.removeValue(forKey: key) }

    /// The transfer was taken out (pause, cancel, preemption, stop): its part keeps what it holds.
    @inlinable public func stopped(_ record: Record, _ report: Report) {
        table.removeValue(forKey: report.key)
        ports.keep(record, PartKeep(report), hash: report.hash)
    }

    /// A transfer ended on its own: the part's step, then the end its machine is told, with its
    /// host's one answer. nil when the transfer is not the book's, or a hashed mirror's failure
    /// started the item again from its next source (`fallsThrough`).
    @inlinable public func ended(_ report: Report) -> (record: Record, end: TransferEnd)? {
        guard let record = table.removeValue(forKey: report.key) else { return nil }
        ports.keep(record, PartKeep(report), hash: report.hash)
        let held = ports.held(record)
        var end: TransferEnd
        if report.fault?.httpStatus == 304, let unchanged = ports.unchanged(record) {
            end = TransferEnd(fault: nil, hasPartial: false, notModified: unchanged)
        } else if let fault = report.fault {
            end = TransferEnd(fault: fault, retryAfter: report.retryAfter, hasPartial: report.bytesInOrder > 0,
                              wholePartialSHA256: wholePart(report, held), wantedSHA256: held.wantedSHA256,
                              tooLargeHint: fault.tooLarge ? ports.tooLargeHint(record) : nil, outage: report.outage)
            if fault.diskFull {
                // Cut for room before (or, of unknown length, while) writing its body: a body that
                // waits is waited for with the size its headers gave (else 1 MiB more than it
                // holds); a write that hit ENOSPC fails at once when its body can never fit.
                if case .never(let why)? = report.noRoom {
                    end.neverFits = why
                } else {
                    if report.noRoom == .later {
                        ports.announce(record, bytes: report.rangeTotal ?? report.contentLength ?? report.bytesInOrder + Self.unsizedStep)
                    }
                    end.neverFits = ports.neverFits(body: report.rangeTotal ?? report.contentLength)
                }
            }
        } else {
            end = TransferEnd(fault: nil, sha256: report.sha256, hasPartial: true, wantedSHA256: held.wantedSHA256)
        }
        if ports.fallsThrough(record, end) {
            if report.fault == nil { _ = ports.hostAnswered(record, report.facts, ended: false) }
            return nil
        }
        // One answer per end; none for an outage (nothing answered) or a transfer taken out.
        if !end.outage && end.fault?.cancelled != true {
            end.pacedRefusal = ports.hostAnswered(record, report.facts, ended: true)
        }
        return (record, end)
    }

    /// Responses began: their validators become the parts', a large body's part gets its
    /// staging name and (with a validator) its state at once — so even a `kill -9` leaves a part
    /// the next run resumes — and their hosts answered, except for a body that ends whole in the
    /// same turn (`endingWhole`): its host answers once, at its end.
    @inlinable public func bodiesBegan(_ starts: [BodyStart<Ports.Facts>], endingWhole: Set<Int>) {
        for start in starts {
            guard let record = table[start.key] else { continue }
            ports.bodyBegan(record, etag: start.etag, lastModified: start.lastModified, restartedFromZero: start.restartedFromZero)
            let held = ports.held(record)
            let total = start.total ?? held.expectedBytes ?? Int64.max
            if total >= Self.resumeStateThreshold, held.partOpen, ports.nameForResume(record), held.validator != nil {
                // The prefix up to where a resume's range began was synced when it started.
                ports.writeResumeState(record, bytes: 0, synced: start.restartedFromZero ? 0 : start.rangeStart ?? 0)
            }
            if !endingWhole.contains(start.key) { _ = ports.hostAnswered(record, start.facts, ended: false) }
        }
    }

    /// Large bodies reached a checkpoint (`--sync-every`): their state says how much of the
    /// part a resume may build on after a power cut. Only a body whose state was written when
    /// it began (named, with a validator) gets one.
    @inlinable public func checkpointsReached(_ checkpoints: [(key: Int, durableBytes: Int64)]) {
        for (key, durable) in checkpoints {
            guard let record = table[key] else { continue }
            let held = ports.held(record)
            guard held.hasStateFile, held.validator != nil, held.partOpen, held.partNamed else { continue }
            ports.writeResumeState(record, bytes: durable, synced: durable)
        }
    }

    // MARK: The rules (and `PartKeep.init(_:)`, the part's step)

    /// A 416 to a resume says the part is whole when the server's total is the bytes it holds,
    /// and only if the answer is about the part's version: a server ignoring `If-Range` sized
    /// another version. The part's digest then, else nil.
    @usableFromInline func wholePart(_ report: Report, _ held: PartHeld) -> String? {
        guard report.fault?.httpStatus == 416, let total = report.rangeTotal, total == report.bytesInOrder, let hash = report.hash,
              !answerContradicts(sent: held.validator, etag: report.etag, lastModified: report.lastModified) else { return nil }
        return ports.digest(hash)
    }
}
