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
/// meanwhile go to the one `SerialEvents` queue: handled after the effects of the event being
/// handled, never inside them. Engine thread only (the simulator's thread in tests).
public final class ItemExecutor<Ports: ItemPorts> {
    public typealias Event = ItemEvent<Ports.Part, Ports.Job>
    public typealias Effect = ItemEffect<Ports.Part, Ports.Job>

    /// The world, as ports. Held strongly: a shell's ports are a small adapter that holds the
    /// shell itself without owning it (the shell owns the executor).
    public let ports: Ports
    @usableFromInline let events = SerialEvents<(Event, Ports.Key)>()

    public init(ports: Ports) { self.ports = ports }

    // Inlinable, as `SerialEvents` is: the daemon sends every item event here, and an
    // unspecialised generic call would reach each port through runtime metadata and witness
    // tables; SpoolDaemon specialises these for its `ItemShell`.

    /// True while an event is being handled: a `send` now only queues.
    public var isHandling: Bool { events.isHandling }

    /// Hands `event` to the item's machine and carries out its effects; returns them. An event
    /// sent while another is handled (by an effect's port, for this item or another) is queued
    /// and handled after it: then this returns nil, having decided nothing yet.
    @inlinable @discardableResult
    public func send(_ event: Event, to key: Ports.Key) -> [Effect]? {
        events.post((event, key), handle)
    }

    /// The handler the queue calls, one event at a time.
    @inlinable
    func handle(_ posted: (event: Event, key: Ports.Key)) -> [Effect] {
        let key = posted.key
        let effects = ports.decide(key, posted.event)
        for effect in effects { perform(effect, for: key) }
        return effects
    }

    /// Carries out one effect through its port; an answer goes to the queue, handled after
    /// this event's effects.
    @inlinable
    func perform(_ effect: Effect, for key: Ports.Key) {
        switch effect {
        case .schedule: ports.schedule(key)
        case .unschedule: ports.unschedule(key)
        case .releaseSlot: ports.releaseSlot(key)
        case .retry(let at, let holdHost): ports.retry(key, at: at, holdHost: holdHost)
        case .hostUnreachable(let error): ports.hostUnreachable(key, error: error)
        case .prepareStart: events.post((.startChecked(ports.checkStart(key)), key), handle)
        case .startTransfer(let credentials): ports.startTransfer(key, credentials: credentials)
        case .stopTransfer(let part): ports.stopTransfer(key, part: part)
        case .nextSource(let part): ports.nextSource(key, part: part)
        case .saveResumeState(let part): ports.saveResumeState(key, part: part)
        case .refreshURL(let reason):
            if let answer = ports.refreshURL(key, reason: reason) { events.post((answer, key), handle) }
        case .waitForSpace(let reason): ports.waitForSpace(key, reason: reason)
        case .leaveSpaceQueue: ports.leaveSpaceQueue(key)
        case .publish(let digest, let part):
            if let job = ports.publish(key, sha256: digest, part: part) { events.post((.publishQueued(job), key), handle) }
        case .retryPublish(let at, let job): ports.retryPublish(key, job: job, at: at)
        case .withdrawPublish:
            if ports.withdrawPublish(key) { events.post((.publishWithdrawn, key), handle) }
        case .discardPartial: ports.discardPartial(key)
        case .keepPartialForRetry: ports.keepPartialForRetry(key)
        case .fail(let failure, let wasPublishing):
            ports.failed(key, failure, wasPublishing: wasPublishing)
            ports.ended(key)
        case .ended: ports.ended(key)
        }
    }
}
