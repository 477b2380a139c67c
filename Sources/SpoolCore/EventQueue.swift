/// Events never nest: the queue both executors (`ItemExecutor`, `GroupEndExecutor`) keep. An
/// effect being carried out may raise another event (a start check answered at once, a part
/// opened, a publish queued, a write answered); handling it right there would enter a machine
/// while the effects of its previous event are still being carried out. Queued here, it is
/// handled after them, in the order raised. The queue is also the guard (as async-http-client's
/// `.modifying` state is): no path enters a machine while `isHandling`.
///
/// No closure: the executor's `send` loops over `take` itself. A generic queue handed the
/// handler as a closure kept the optimiser on the unspecialised path for every item event
/// (runtime metadata per event). Its steps are `@_transparent`: inlined into the executor's
/// `send` in every build, debug too, so the queue adds no call to an event's path.
public struct EventQueue<Event> {
    @usableFromInline var pending: [Event] = []
    @usableFromInline var next = 0
    @usableFromInline var handling = false

    @inlinable public init() {}

    /// True while an event (or one it raised) is being handled.
    @_transparent public var isHandling: Bool { handling }

    /// A `send`'s event: true when none was being handled, so the caller handles it and then
    /// each event `take` gives until it gives nil; false when it waits behind the one handled.
    @_transparent public mutating func enter(_ event: Event) -> Bool {
        pending.append(event)
        if handling { return false }
        handling = true
        return true
    }

    /// An event raised while one is handled (an effect's answer): handled after it.
    @_transparent public mutating func raise(_ event: Event) { pending.append(event) }

    /// The next event to handle, in order; nil when every one was handled, and the queue is
    /// idle again. Bounded: each event is taken once, and an event raises events only through
    /// effects its machine returned (a finite walk per item or request).
    @_transparent public mutating func take() -> Event? {
        if next < pending.count {
            next += 1
            return pending[next - 1]
        }
        pending.removeAll(keepingCapacity: true)
        next = 0
        handling = false
        return nil
    }
}
