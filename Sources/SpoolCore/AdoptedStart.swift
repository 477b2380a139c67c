/// What an adopted request's item does first, as its recovery decided.
public enum FirstStep: Sendable, Equatable {
    /// Queue it: afresh, or to resume its part.
    case submit
    /// It had ended already (published or failed): counted as ended.
    case ended
    /// Its data is staged and verified, or published without its marker: its job, in its
    /// publishing phase, goes to the publisher.
    case publish
}

/// Where an adopted request's first steps go: its items' machines, its group, the publisher.
public protocol AdoptedStartPorts {
    associatedtype Key
    /// The item's machine gets `.submitted`.
    func submit(_ key: Key)
    /// The item is counted as ended: its group is told (`.itemEnded`).
    func ended(_ key: Key)
    /// The item's job (in its publishing phase) joins the publish queue.
    func publish(_ key: Key)
}

/// An accepted request's start: each item's first step in file order, through its ports
/// (`begin`), then its deadlines and its group (`start`). The daemon (`Engine.accepted`) and the
/// simulator's workers both start every request, fresh or adopted, through it.
///
/// Why in this order and this way: the request's group already counts every item (a recovered
/// item may end at once, and the group must not end before its later items are even known); an
/// item found ended is counted down like one that ends later, so the group ends by the one rule
/// (`GroupMachine`), also when every item was found ended. The caller tells the group `.taken`
/// after.
public enum AdoptedStart {
    public static func begin<P: AdoptedStartPorts>(_ steps: [(key: P.Key, first: FirstStep)], ports: P) {
        for (key, first) in steps {
            switch first {
            case .submit: ports.submit(key)
            case .ended: ports.ended(key)
            case .publish: ports.publish(key)
            }
        }
    }
}
/// What the recovery of one adopted item made of it (the daemon's `RecoveryStep`).
public enum AdoptedRecovery<Confirmed> {
    /// Queue it (afresh, or to resume its part).
    case schedule
    /// It has ended already; `confirm`: its record to journal as published (see `RecoveryOutcome`).
    case ended(confirm: Confirmed?)
    /// Its job goes to the publisher.
    case publish
}

/// A request file as intake read it: its index, or why it cannot be taken in.
public enum RequestRead<Index> {
    case indexed(Index)
    /// Refused (filed in `rejected/`).
    case rejected
    /// Could not be read; left claimed for the next run.
    case unreadable
}

/// Where an adopted request's acceptance goes: the item table, each item's recovery, the
/// journal ledger. The daemon's `Intake` answers with its records and the disk; the seeded
/// simulator with its own; both accept an adopted request by `AdoptedIntake.accept`.
public protocol AdoptedIntakePorts {
    associatedtype Index
    associatedtype Key
    associatedtype Items: Collection where Items.Element == Key
    associatedtype Confirmed
    /// The request and its items recorded (the item table), in file order.
    func add(_ index: Index) -> Items
    /// The ledger counts the request as adopted: the dead worker's journals stay until it ends.
    func adopted()
    /// An adopted request that could not be taken in: the ledger expects one adoption fewer.
    func adoptionDropped()
    /// The operator cancelled the whole request before the crash (its cancel record).
    func cancelled() -> Bool
    /// An upload item whose upload record the request wrote before the crash: recovered as
    /// uploaded (true); it is not sent again.
    func recoverUpload(_ key: Key) -> Bool
    /// The item recovered from what the spool says about it (`RecoveryCarrier`).
    func recover(_ key: Key) -> AdoptedRecovery<Confirmed>
    /// An item that would be queued again ends cancelled, as its request's cancel had ended it.
    func endCancelled(_ key: Key)
    /// The records found published but not journaled so, journaled (not synced) and attached.
    func journal(_ confirmed: [Confirmed])
}

/// An adopted request's acceptance: its items recovered in file order, each given its first
/// step (`FirstStep`, carried out by `AdoptedStart`).
///
/// | read / found | done |
/// |---|---|
/// | rejected or unreadable | the ledger drops the adoption; no item, no group |
/// | indexed | the request recorded, the ledger counts it adopted |
/// | an upload already recorded | ended |
/// | to be queued, the request cancelled before the crash | ended cancelled |
/// | to be queued | submitted |
/// | ended (published or failed) | ended; a record to confirm is journaled with the others, once, after the loop |
/// | its job staged | published |
public enum AdoptedIntake {
    public static func accept<P: AdoptedIntakePorts>(_ read: RequestRead<P.Index>,
                                                     ports: P) -> [(key: P.Key, first: FirstStep)]? {
        guard case .indexed(let index) = read else {
            ports.adoptionDropped()
            return nil
        }
        let items = ports.add(index)
        ports.adopted()
        let cancelled = ports.cancelled()
        var steps: [(key: P.Key, first: FirstStep)] = []
        steps.reserveCapacity(items.count)
        var confirmed: [P.Confirmed] = []
        for key in items {
            if ports.recoverUpload(key) { steps.append((key, .ended)); continue }
            switch ports.recover(key) {
            case .schedule where cancelled:
                ports.endCancelled(key)
                steps.append((key, .ended))
            case .schedule: steps.append((key, .submit))
            case .ended(let confirm):
                if let confirm { confirmed.append(confirm) }
                steps.append((key, .ended))
            case .publish: steps.append((key, .publish))
            }
        }
        if !confirmed.isEmpty { ports.journal(confirmed) }
        return steps
    }
}

/// Where an accepted request's start goes, beyond its items' first steps: its deadlines and its group.
public protocol RequestStartPorts: AdoptedStartPorts {
    /// Its group still counts items not ended.
    var hasOpenItems: Bool { get }
    /// Its deadlines (the request's, the URLs' expiries) scheduled.
    func scheduleDeadlines()
    /// Its group told `.taken`.
    func taken()
}

extension AdoptedStart {
    /// An adopted request's start: each item's first step, then (only when its group still has
    /// open items: a request found ended needs no deadline) its deadlines, then its group taken.
    public static func start<P: RequestStartPorts>(adopted steps: [(key: P.Key, first: FirstStep)], ports: P) {
        begin(steps, ports: ports)
        started(ports)
    }

    /// A fresh request's start: every item queued, in file order (no per-item steps), then as an
    /// adopted one's. (The daemon's `Engine.accepted` takes these steps inline for a fresh
    /// request: the ports would cost six calls per request file on its hottest path.)
    public static func start<P: RequestStartPorts, C: Sequence>(fresh keys: C, ports: P) where C.Element == P.Key {
        for key in keys { ports.submit(key) }
        started(ports)
    }

    private static func started<P: RequestStartPorts>(_ ports: P) {
        if ports.hasOpenItems { ports.scheduleDeadlines() }
        ports.taken()
    }
}
