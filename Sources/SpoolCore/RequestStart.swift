/// What an accepted request's item does first: queued for a fresh request; for an adopted one,
/// as its recovery decided.
public enum FirstStep: Sendable, Equatable {
    /// Queue it: afresh, or to resume its part.
    case submit
    /// It had ended already (published or failed): counted as ended.
    case ended
    /// Its data is staged and verified, or published without its marker: its job, in its
    /// publishing phase, goes to the publisher.
    case publish
}

/// Where a request's first steps go: its items' machines, its group, the publisher.
public protocol FirstStepPorts {
    associatedtype Key
    /// The item's machine gets `.submitted`.
    func submit(_ key: Key)
    /// The item is counted as ended: its group is told (`.itemEnded`).
    func ended(_ key: Key)
    /// The item's job (in its publishing phase) joins the publish queue.
    func publish(_ key: Key)
}

/// Where an accepted request's start goes, beyond its items' first steps: its deadlines and its group.
public protocol RequestStartPorts: FirstStepPorts {
    /// Its group still counts items not ended.
    var hasOpenItems: Bool { get }
    /// Its deadlines (the request's, the URLs' expiries) scheduled.
    func scheduleDeadlines()
    /// Its group told `.taken`.
    func taken()
}

/// An accepted request's start, fresh or adopted: each item's first step in file order, then its
/// deadlines (only while its group has open items: a request found ended needs none), then its
/// group taken. The daemon (`Engine.accepted`) and the simulator's workers start every request
/// through it.
///
/// Why in this order and this way: the request's group already counts every item (a recovered
/// item may end at once, and the group must not end before its later items are even known); an
/// item found ended is counted down like one that ends later, so the group ends by the one rule
/// (`GroupMachine`), also when every item was found ended, and `.taken` comes last.
public enum RequestStart {
    /// An adopted request's start: each item's first step as its recovery decided.
    public static func start<P: RequestStartPorts>(adopted steps: [(key: P.Key, first: FirstStep)], ports: P) {
        begin(steps, ports: ports)
        if ports.hasOpenItems { ports.scheduleDeadlines() }
        ports.taken()
    }

    /// A fresh request's start: every item queued, in file order (a list of 100,000 URLs builds
    /// no list of steps).
    public static func start<P: RequestStartPorts, C: Sequence>(fresh keys: C, ports: P) where C.Element == P.Key {
        for key in keys { ports.submit(key) }
        if ports.hasOpenItems { ports.scheduleDeadlines() }
        ports.taken()
    }

    /// Each item's first step, in file order, through its ports.
    public static func begin<P: FirstStepPorts>(_ steps: [(key: P.Key, first: FirstStep)], ports: P) {
        for (key, first) in steps {
            switch first {
            case .submit: ports.submit(key)
            case .ended: ports.ended(key)
            case .publish: ports.publish(key)
            }
        }
    }
}
