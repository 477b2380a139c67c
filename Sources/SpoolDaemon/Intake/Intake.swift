import Foundation
import SpoolCore
import Logging
import SpoolRequest
import SpoolStore
import SpoolWatcher

/// The intake room: turns names in `incoming/` and requests of dead workers into claimed,
/// parsed requests. It claims each file (a rename into this worker's folder; no descriptor is
/// held), validates it whole, and files what cannot be used in `rejected/` with its reason (on
/// the I/O queue). Every name is claimed as soon as it is seen: there is no claim limit, so a
/// request due now never waits behind requests due later. Listings and adoptions wait in its
/// backlog, taken in a few milliseconds' worth per turn (`takeIn`).
///
/// What it hands on is a request accepted into the item table (`accept`): its records, and what
/// each item does first — queued, or, for an adopted request, recovered from what the spool says
/// about it (queued to resume, ended already, or published again). The engine sends each item
/// its first event.
final class Intake {
    private let store: SpoolStore
    private let io: any IOSubmitting
    private let logger: Logger
    private let ledger: JournalLedger
    private let table: ItemTable
    private var limits: ParseLimits
    /// Listed and adopted request files not taken in yet (see `IntakeBacklog`).
    private var backlog = IntakeBacklog()
    /// The watcher's first listing of `incoming/` has been taken up: until then a drain cannot
    /// know that nothing is left.
    private(set) var initialScanDone = false
    /// `staging/` as listed at the last adoption (see `Recovery.stagingNames`).
    private var adoptedStagingNames: Set<String>?
    /// When to look for requests in `active/` whose worker died (nil: never again).
    private(set) var nextAdoptionScan: Date?

    init(store: SpoolStore, io: any IOSubmitting, logger: Logger, ledger: JournalLedger, table: ItemTable,
         maxItems: Int, maxRequestBytes: Int) {
        self.store = store
        self.io = io
        self.logger = logger
        self.ledger = ledger
        self.table = table
        limits = ParseLimits(maxBytes: maxRequestBytes, maxItems: maxItems)
        // Fenced off: another worker renamed this worker's folder away (it had not renewed its
        // lease for the lease timeout: stopped, paused, cut off). Every request this worker held
        // is that worker's now; publishing or filing any of them could deliver it twice. So it
        // stops at once, as if killed, committing nothing more (exit 4: a service manager
        // restarts it as a fresh worker).
        store.onLeaseLost { [logger] reason in
            logger.critical("this worker was fenced off and stops at once, committing nothing more: \(reason)")
            _exit(4)
        }
    }

    /// Nothing listed or adopted waits to be taken in.
    var backlogIsEmpty: Bool { backlog.isEmpty }

    /// How an adopted item is recovered from what the spool says about it.
    private var recovery: Recovery { Recovery(store: store, logger: logger, stagingNames: adoptedStagingNames) }

    /// A request taken into the item table, and what each of its items does first.
    struct Accepted {
        let request: RequestRecord
        let index: RequestIndex
        /// For an adopted request, each item's first step, in file order; nil for a fresh one,
        /// whose items are all queued (no list for a fresh list of 100,000 URLs).
        /// Carried out by the core's `RequestStart`, as the simulator's workers carry theirs out.
        var recovered: [(key: ItemRecord, first: FirstStep)]?
    }

    /// What became of a claimed request file.
    enum Acceptance {
        case accepted(Accepted)
        /// Refused (filed in `rejected/` on the I/O queue).
        case rejected
        /// Could not be read; left claimed for the next run.
        case unreadable
    }

    /// Parses the claimed (or adopted) request whole and records it and its items in the table;
    /// an adopted request's items are recovered from what the spool says about them, and those
    /// found published are journaled (see `RecoveryStep.ended`).
    func accept(_ claimed: ClaimedRequest, adopted: Bool, now: Date) -> Acceptance {
        // A retry the daemon's user queued for a producer is that producer's (`FailedRetry`).
        let owner = FailedRetry.originalOwner(of: claimed.name, fileOwner: claimed.owner, daemonUser: geteuid(), in: store.layout)
        let claim = owner == claimed.owner ? claimed
            : ClaimedRequest(name: claimed.name, inode: claimed.inode, folder: claimed.folder, owner: owner)
        let parsed = parse(claim, checkUploads: !adopted)
        if adopted { return acceptAdopted(claim, parsed, now: now) }
        let index: RequestIndex
        var uploads: [Int: OutgoingIdentity] = [:]
        switch parsed {
        case .indexed(let indexed, let found): index = indexed; uploads = found
        case .rejected: return .rejected
        case .unreadable: return .unreadable
        }
        let request = table.add(claim: claim, index: index) { _ in ItemLifecycle(firstQueued: now) }
        if !uploads.isEmpty {
            for record in request.items { if let identity = uploads[record.index] { var state = record.upload; state.identity = identity; record.noteUpload(state) } }
        }
        // A retry's request with partials a deadline left (`KeptParts`): resumed as an
        // adopted item's would be; the others start afresh.
        if KeptParts.takeMark(claim.name, in: store.layout) {
            let recovery = Recovery(store: store, logger: logger)
            for record in request.items { _ = recovery.recover(record, deadStates: [:]) }
        }
        return .accepted(Accepted(request: request, index: index))
    }

    /// An adopted request, accepted by the core's `AdoptedIntake` (as the simulator's workers
    /// accept theirs): recorded, each item recovered (ended cancelled where it would be queued
    /// again and the operator had cancelled the whole request), the items found published
    /// journaled; the ledger counts it adopted, or dropped when it cannot be taken in.
    private func acceptAdopted(_ claim: ClaimedRequest, _ parsed: Parsed, now: Date) -> Acceptance {
        let read: RequestRead<RequestIndex>
        switch parsed {
        case .indexed(let index, _): read = .indexed(index)
        case .rejected: read = .rejected
        case .unreadable: read = .unreadable
        }
        let ports = AdoptedIntakeShell(store: store, logger: logger, ledger: ledger, table: table, recovery: recovery,
                                       claim: claim, now: now)
        guard let steps = AdoptedIntake.accept(read, ports: ports), let request = ports.request,
              case .indexed(let index) = read else {
            if case .rejected = read { return .rejected }
            return .unreadable
        }
        return .accepted(Accepted(request: request, index: index, recovered: steps))
    }

    /// Names listed in `incoming/` (at start, after an inotify overflow, by a rescan): claimed
    /// from the backlog, oldest first. `initial`: the watcher's first listing.
    func listed(_ names: [String], initial: Bool = false) {
        backlog.append(contentsOf: names.lazy.map { .incoming($0) })
        if initial { initialScanDone = true }
    }

    /// Scans for dead workers every `interval` seconds from now (0: not again).
    func scheduleAdoptions(every interval: Double, now: Date) {
        nextAdoptionScan = interval > 0 ? now.addingTimeInterval(interval) : nil
    }

    /// A reload: the scan comes no later than `interval` from now (0: not again).
    func rescheduleAdoptions(every interval: Double, now: Date) {
        nextAdoptionScan = interval > 0 ? min(nextAdoptionScan ?? .distantFuture, now.addingTimeInterval(interval)) : nil
    }

    /// Takes over the requests in `active/` whose worker is gone. Their publish journals are read
    /// after the claims: a worker that died before the scan has released every lock it held, so
    /// all of its journals are readable by then. The requests themselves are read and recovered
    /// from the backlog, after `READY=1`. `alone`: no other worker lives (the journals are read
    /// even with nothing to adopt: they are all a dead run's).
    func adoptOrphans(alone: Bool) {
        let claims = store.adoptOrphans()
        if !claims.isEmpty || alone {
            let (states, files) = store.readJournals()
            ledger.learn(states: states, files: files, preferring: store.preferringPublished)
        }
        if !claims.isEmpty {
            logger.notice("adopting the requests of workers that are gone", metadata: ["requests": "\(claims.count)"])
            adoptedStagingNames = Set(store.layout.staging.list())
            ledger.expectAdoptions(claims.count)
            backlog.append(contentsOf: claims.lazy.map { .adopted($0) })
        }
        ledger.forgetDeadIfSpent()
    }

    /// The periodic scan for dead workers, when it is due.
    func adoptIfDue(now: Date, interval: Double) {
        guard let at = nextAdoptionScan, at <= now else { return }
        nextAdoptionScan = now.addingTimeInterval(interval)
        adoptOrphans(alone: false)
    }

    /// Takes in backlog entries until the turn's budget is spent (at least one per turn): a name
    /// is handed to `claim`, an adopted request that is still this worker's to `accept`. While
    /// `stopping`, adopted requests are left where they lie, in a folder this worker holds: the
    /// next worker adopts them. `groupPending`: the hook of a group that turned out to have
    /// ended already.
    func takeIn(stopping: Bool, claim: (String) -> Void, accept: (ClaimedRequest) -> Void,
                groupPending: (PendingGroupHook) -> Void) {
        guard !backlog.isEmpty else { return }
        let deadline = Date().addingTimeInterval(IntakeBacklog.turnBudget)
        while let entry = backlog.next() {
            switch entry {
            case .incoming(let name):
                claim(name)
            case .adopted(let adopted):
                if stopping {
                    ledger.adoptionDropped()
                } else {
                    switch store.takeAdopted(adopted) {
                    case .claim(let claimed):
                        logger.debug("adopted a request whose worker is gone", metadata: ["request": "\(claimed.name)"])
                        accept(claimed)
                    case .filed(let name, let inode):
                        ledger.adoptionDropped()
                        logger.notice("a request whose group had ended was still claimed too (a power cut kept its old name); not worked on again",
                                      metadata: ["request": "\(name)"])
                        if let pending = store.finishFiledGroup(name, inode: inode) { groupPending(pending) }
                    case .gone:
                        ledger.adoptionDropped()
                    }
                }
            }
            // The clock after every entry: one entry may be a list of 100,000 URLs (half a second).
            if Date() >= deadline { break }
        }
    }

    /// A reload: new limits for the request files parsed from now on.
    func update(maxItems: Int, maxRequestBytes: Int) {
        limits = ParseLimits(maxBytes: maxRequestBytes, maxItems: maxItems)
    }

    /// What became of a name in `incoming/`.
    enum Outcome {
        case claimed(ClaimedRequest)
        /// Not a request file the daemon may read (a symlink, a fifo): filed in `rejected/`.
        case rejected
        /// Nothing to do: not a candidate, or already gone.
        case none
        /// The claim failed (logged); the file stays in `incoming/`.
        case failed
    }

    func claim(_ name: String) -> Outcome {
        guard DirectoryWatcher.isCandidate(name) else { return .none }
        do {
            switch try store.claim(name) {
            case .gone:
                return .none
            case .lost:
                logger.debug("another worker claimed the request first", metadata: ["request": "\(name)"])
                return .none
            case .refused(let code, let message):
                logger.warning("rejected a request file: \(message)", metadata: ["request": "\(name)", "code": "\(code)"])
                let record = ErrorRecord(request: name, code: code, message: message)
                let store = self.store
                io.submit {
                    do throws(StoreError) { try store.rejectUnclaimed(name, record); return .rejected(request: name, error: nil) }
                    catch { return .rejected(request: name, error: error) }
                }
                return .rejected
            case .claimed(let claim):
                return .claimed(claim)
            }
        } catch {
            logger.error("could not claim a request file: \(error)", metadata: ["request": "\(name)"])
            return .failed
        }
    }
    /// Validates a claimed request whole, reading it from its file in chunks, and returns its
    /// index (the file's settings and one small summary per item; none of its text). A file that
    /// does not parse goes to `rejected/` with the line and the rule. A file that cannot be read
    /// (an I/O error, not the file's fault) is logged and left claimed: the next run adopts it.
    ///
    /// `checkUploads`: each upload item's file must be in `outgoing/` and sendable (a fresh
    /// claim; an adopted request's files were checked at its claim, and may since have been sent
    /// and moved on).
    func parse(_ claim: ClaimedRequest, checkUploads: Bool) -> Parsed {
        do {
            let fd: Int32
            do { fd = try claim.openFile() } catch {
                logger.error("could not read a claimed request file; it stays claimed for the next run: \(error)",
                             metadata: ["request": "\(claim.name)"])
                return .unreadable
            }
            defer { close(fd) }
            let index = try RequestParser.index(fileName: claim.name, descriptor: fd, limits: limits)
            var uploads: [Int: OutgoingIdentity] = [:]
            if checkUploads && !index.uploads.isEmpty {
                switch checkOutgoing(index) {
                case .success(let found): uploads = found
                case .failure(let refusal):
                    reject(claim, refusal)
                    return .rejected
                }
            }
            return .indexed(index, uploads: uploads)
        } catch {
            switch error {
            case .rejected(let rejection):
                reject(claim, rejection)
                return .rejected
            case .unreadable:
                logger.error("could not read a claimed request file; it stays claimed for the next run: \(error)",
                             metadata: ["request": "\(claim.name)"])
                return .unreadable
            }
        }
    }

    /// What became of a claimed request file's parse.
    enum Parsed {
        /// Parsed; `uploads`: each upload item's file as intake found it (by item index).
        case indexed(RequestIndex, uploads: [Int: OutgoingIdentity])
        /// Refused (filed in `rejected/` on the I/O queue).
        case rejected
        /// Could not be read; left claimed.
        case unreadable
    }

    /// Each upload item's file as found now (by item index), or the first that cannot be sent,
    /// as a rejection on its `url` line.
    private func checkOutgoing(_ index: RequestIndex) -> Result<[Int: OutgoingIdentity], RequestRejection> {
        var found: [Int: OutgoingIdentity] = [:]
        for upload in index.uploads {
            do throws(OutgoingRefusal) { found[upload.index] = try store.checkOutgoing(upload.name) } catch {
                return .failure(RequestRejection(file: index.fileName, line: upload.line, rule: error.rule,
                                                 message: "upload: " + error.reason + "; nothing was sent"))
            }
        }
        return .success(found)
    }

    private func reject(_ claim: ClaimedRequest, _ rejection: RequestRejection) {
        logger.warning("rejected a request file: \(rejection.description)", metadata: ["request": "\(claim.name)"])
        var rejected = ErrorRecord(request: claim.name, code: rejection.rule, message: rejection.message, line: rejection.line)
        rejected.owner = SpoolAccounts.userName(claim.owner)
        rejected.ownerUID = Int(claim.owner)
        let record = rejected
        let store = self.store
        io.submit {
            do throws(StoreError) { try store.reject(claim, record); return .rejected(request: claim.name, error: nil) }
            catch { return .rejected(request: claim.name, error: error) }
        }
    }

    /// The I/O queue filed a rejected request (or could not).
    func rejectionFiled(_ request: String, error: StoreError?) {
        if let error { logger.error("could not file a rejected request: \(error)", metadata: ["request": "\(request)"]) }
    }
}
