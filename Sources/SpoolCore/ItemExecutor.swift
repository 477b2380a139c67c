import Foundation

/// The one owner that carries out the item machine's effects and tells the machine what
/// happened: the daemon and the simulator both run items through it, each giving it its own
/// ports (`ItemPorts`), so the seeds check the code the daemon runs rather than a copy of it.
///
/// One entry, `send`: the item's machine takes the event (through its own one entry,
/// `ItemMachine.handle`, which the machine port runs with the facts besides the event), and each
/// effect it returns goes to the port that owns it, with what the effect carries (the part, the
/// job, the failure record: the executor reads no state back). An answer to an effect (a start
/// checked, a job queued, a job withdrawn, a refresh hook's word) and any event a port raises
/// meanwhile are queued (`EventQueue`): handled after the effects of the event being handled,
/// in the order raised, never inside them. Engine thread only (the simulator's thread in tests).
///
/// The dispatch is written out in `send`, which loops over the queue itself: every item event of
/// the daemon comes through here, and a handler passed as a closure over a generic method made
/// the optimiser keep the unspecialised path (runtime metadata and witness tables per event: a
/// fifth of a 200,000-item cancel).
public final class ItemExecutor<Ports: ItemPorts> {
    public typealias Event = ItemEvent<Ports.Part, Ports.Job, Ports.Receipt>
    public typealias Effect = ItemEffect<Ports.Part, Ports.Job>

    /// The world, as ports. Held strongly: a shell's ports are a small adapter that holds the
    /// shell itself without owning it (the shell owns the executor).
    public let ports: Ports
    /// Events sent while one is handled, and answers: handled after it, in order.
    @usableFromInline var events = EventQueue<(Event, Ports.Key)>()

    public init(ports: Ports) { self.ports = ports }

    /// True while an event is being handled: a `send` now only queues.
    public var isHandling: Bool { events.isHandling }

    /// Hands `event` to the item's machine and carries out its effects, then those of every
    /// event raised meanwhile; returns the effects of `event`. An event sent while another is
    /// handled (by an effect's port, for this item or another) is queued and handled after it:
    /// then this returns nil, having decided nothing yet.
    ///
    /// Inlinable: SpoolDaemon specialises it for its `ItemShell`.
    @inlinable @discardableResult
    public func send(_ event: Event, to key: Ports.Key) -> [Effect]? {
        guard events.enter((event, key)) else { return nil }
        var first: [Effect]? = nil
        while let (event, key) = events.take() {
            let effects = ports.decide(key, event)
            for effect in effects {
                switch effect {
                case .schedule: ports.schedule(key)
                case .unschedule: ports.unschedule(key)
                case .releaseSlot: ports.releaseSlot(key)
                case .retry(let at, let holdHost): ports.retry(key, at: at, holdHost: holdHost)
                case .hostUnreachable(let error): ports.hostUnreachable(key, error: error)
                case .prepareStart: events.raise((.startChecked(ports.checkStart(key)), key))
                case .startTransfer(let credentials): ports.startTransfer(key, credentials: credentials)
                case .stopTransfer(let part): ports.stopTransfer(key, part: part)
                case .nextSource(let part): ports.nextSource(key, part: part)
                case .saveResumeState(let part): ports.saveResumeState(key, part: part)
                case .refreshURL(let reason):
                    if let answer = ports.refreshURL(key, reason: reason) { events.raise((answer, key)) }
                case .waitForSpace(let reason): ports.waitForSpace(key, reason: reason)
                case .leaveSpaceQueue: ports.leaveSpaceQueue(key)
                case .publish(let digest, let part):
                    if let job = ports.publish(key, sha256: digest, part: part) { events.raise((.publishQueued(job), key)) }
                case .retryPublish(let at, let job): ports.retryPublish(key, job: job, at: at)
                case .withdrawPublish:
                    if ports.withdrawPublish(key) { events.raise((.publishWithdrawn, key)) }
                case .discardPartial: ports.discardPartial(key)
                case .keepPartialForRetry: ports.keepPartialForRetry(key)
                case .fail(let failure, let wasPublishing):
                    ports.failed(key, failure, wasPublishing: wasPublishing)
                    ports.ended(key)
                case .ended: ports.ended(key)
                }
            }
            if first == nil { first = effects }
        }
        return first
    }
}
