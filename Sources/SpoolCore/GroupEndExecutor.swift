import Foundation

/// The ports through which `GroupEndExecutor` reaches the world: the daemon's group-end room
/// (`GroupEnds`, through its adapter) and the simulator's worker (`SimGroupEndPorts`) each give
/// their own. `Key` names a request (the daemon's record, the simulator's name); `Written` is
/// what a written end leaves for the group hook (the daemon's marker path and batch journal).
public protocol GroupEndPorts: AnyObject {
    associatedtype Key
    associatedtype Written
    /// Hands `event` to the request's `GroupMachine` (its one entry, `handle`, at `now`) and
    /// returns its effects; none for a request the port no longer knows. The machine lives with
    /// the port (the daemon's request record, the simulator's table).
    func decide(_ key: Key, _ event: GroupMachine.Event, now: Date) -> [GroupMachine.Effect]
    /// Writes the group marker and files the request. Its outcome comes back later through the
    /// executor's `send` (`endWritten` with what the write left, or `endFailed`); a port that
    /// answers at once is queued behind the event being handled.
    func writeEnd(_ key: Key)
    /// The end is written: forget the request and its items, release its journals, run its
    /// group hook with `written`.
    func forget(_ key: Key, written: Written?)
    /// The end's write failed: try again at `at` (then `retryDue` comes back through `send`).
    func retry(_ key: Key, at: Date)
    /// Let go without an end (a drain's permanent error, or a request another worker took over).
    func letGo(_ key: Key, _ why: GroupLetGo)
}

/// The one owner that carries out a request's `GroupMachine` effects — the end written, the
/// request forgotten, a failed end timed for another try, a request let go — for the daemon
/// and the simulator alike, each giving its own ports (`GroupEndPorts`): the seeds check the
/// dispatch the daemon runs, not a copy of it.
///
/// One entry, `send`: the machine takes the event and each effect goes to its port. An event
/// raised while effects are carried out (a port that answers its write at once) is queued and
/// handled after them, in the order raised, never inside them (`EventQueue`, as `ItemExecutor`'s
/// are). Engine thread only (the simulator's thread in tests).
public final class GroupEndExecutor<Ports: GroupEndPorts> {
    public typealias Posted = (event: GroupMachine.Event, key: Ports.Key, now: Date, written: Ports.Written?)

    public let ports: Ports
    /// Events sent while one is handled: handled after it, in order.
    var events = EventQueue<Posted>()

    public init(ports: Ports) { self.ports = ports }

    /// True while an event is being handled: a `send` now only queues.
    public var isHandling: Bool { events.isHandling }

    /// Hands `event` to the request's group machine at `now` and carries out its effects, then
    /// those of every event raised meanwhile; `written`: what a written end left (with
    /// `endWritten`), for `forget`. Returns the effects of `event`; nil when it was queued
    /// behind one being handled.
    @discardableResult
    public func send(_ event: GroupMachine.Event, to key: Ports.Key, now: Date,
                     written: Ports.Written? = nil) -> [GroupMachine.Effect]? {
        guard events.enter((event, key, now, written)) else { return nil }
        var first: [GroupMachine.Effect]? = nil
        while let current = events.take() {
            let effects = ports.decide(current.key, current.event, now: current.now)
            for effect in effects {
                switch effect {
                case .writeEnd: ports.writeEnd(current.key)
                case .forget: ports.forget(current.key, written: current.written)
                case .retry(let at): ports.retry(current.key, at: at)
                case .letGo(let why): ports.letGo(current.key, why)
                }
            }
            if first == nil { first = effects }
        }
        return first
    }
}
