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
/// step (`FirstStep`, carried out by `RequestStart`).
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
