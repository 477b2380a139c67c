import Foundation
import SpoolCore

/// Values that become due at a time: publish retries, group-end retries. The engine sleeps until
/// the earliest `next` and takes what is due on each turn.
struct DueTimers<Value> {
    private var entries: [(at: Date, value: Value)] = []

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }

    /// The earliest deadline, nil when nothing waits.
    var next: Date? { entries.lazy.map(\.at).min() }

    mutating func add(_ value: Value, at: Date) {
        entries.append((at, value))
    }

    /// Removes and returns the values due at `now`, in the order they were added.
    mutating func takeDue(now: Date) -> [Value] {
        guard entries.contains(where: { $0.at <= now }) else { return [] }
        let due = entries.filter { $0.at <= now }.map(\.value)
        entries.removeAll { $0.at <= now }
        return due
    }

    func contains(where matches: (Value) -> Bool) -> Bool {
        entries.contains { matches($0.value) }
    }

    /// Drops the values that match (an item cancelled while its retry waits).
    mutating func removeAll(where matches: (Value) -> Bool) {
        entries.removeAll { matches($0.value) }
    }
}
