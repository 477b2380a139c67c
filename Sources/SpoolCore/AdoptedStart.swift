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

/// An adopted request's start, as intake accepts it: each item's first step in file order,
/// through its ports. The daemon (`Engine.accept`) and the simulator's workers both start an
/// adopted request through it.
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
