/// The one place where events meet the machines: one event at a time, to the end. An effect the
/// shell carries out may raise another event (a start check answered at once, a part opened, a
/// publish queued, another item's deadline check); handling it right there would enter a
/// machine while the shell is still carrying out the effects of its previous event, which read
/// the state that event left — three sends deep in one turn. Here it is queued instead, and
/// handled after the effects of the event being handled, in the order raised.
///
/// The queue is also the guard (as async-http-client's `.modifying` state is): `isHandling`
/// says that an event is being handled, and no path enters `handle` while it is true.
/// Engine thread only (one per owner: the daemon's executor, the simulator's).
///
/// Inlinable: the daemon posts every item event here, and an unspecialised generic call would
/// copy each event through runtime metadata.
public final class SerialEvents<Event> {
    @usableFromInline var pending: [Event] = []
    @usableFromInline var handling = false
    /// True while an event (or one it raised) is being handled: a `post` now only queues.
    public var isHandling: Bool { handling }

    @inlinable public init() {}

    /// Handles `event` and then every event raised meanwhile, in order, and returns what
    /// handling `event` itself returned; nil when an event is being handled now, and `event` is
    /// queued behind it (handled before the outer `post` returns).
    @inlinable @discardableResult
    public func post<Result>(_ event: Event, _ handle: (Event) -> Result) -> Result? {
        if handling {
            pending.append(event)
            return nil
        }
        handling = true
        let result = handle(event)
        var next = 0
        // Bounded: each event is handled once, and an event raises events only through effects
        // the machine returned for a phase change it made (a finite walk per item).
        while next < pending.count {
            let raised = pending[next]
            next += 1
            _ = handle(raised)
        }
        pending.removeAll(keepingCapacity: true)
        // `handle` cannot throw: nothing leaves between the two assignments but this return.
        handling = false
        return result
    }
}
