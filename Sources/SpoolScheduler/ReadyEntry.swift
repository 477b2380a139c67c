import Foundation

// The entries of the scheduler's heaps: what a queued or running item is reduced to while it
// waits, kept apart from `Scheduler` because their size and ordering are a contract of their own
// (a million may wait; `<` decides who starts first).

/// A queued or running item with its arrival number, in 32 bytes (`ScheduledItem` with its
/// host string and optional would take 56): `<` means "should start first".
struct ReadyEntry: Sendable, Comparable {
    var key: ItemKey
    var arrival: UInt64
    /// The earliest start in seconds since 1970, 0 when none (as the ordering treats "none").
    var start: Double
    /// The host's number in the scheduler's host table.
    var host: UInt32
    var priority: SchedulingPriority
    var discretionary: Bool

    static func < (a: ReadyEntry, b: ReadyEntry) -> Bool {
        if a.priority != b.priority { return a.priority > b.priority }
        if a.start != b.start { return a.start < b.start }
        return a.arrival < b.arrival
    }
    static func == (a: ReadyEntry, b: ReadyEntry) -> Bool { a.arrival == b.arrival && a.key == b.key }
}

/// An entry in the timer heap.
struct TimedEntry: Sendable, Comparable {
    var notBefore: Double
    var entry: ReadyEntry
    static func < (a: TimedEntry, b: TimedEntry) -> Bool {
        a.notBefore != b.notBefore ? a.notBefore < b.notBefore : a.entry < b.entry
    }
    static func == (a: TimedEntry, b: TimedEntry) -> Bool { a.notBefore == b.notBefore && a.entry == b.entry }
}

/// Host keys by number: an entry keeps a 4-byte number, not the string (a million entries may
/// wait). Hosts are few; the table never shrinks, so a number once given names its host for good.
struct HostNumbers: Sendable {
    private var names: [String] = []
    private var numbers: [String: UInt32] = [:]

    /// The host key `number` stands for.
    func name(of number: UInt32) -> String { names[Int(number)] }

    /// The number `key` has, if it has one.
    func knownNumber(_ key: String) -> UInt32? { numbers[key] }

    /// The number of `key`, given one when it has none yet.
    mutating func number(_ key: String) -> UInt32 {
        if let n = numbers[key] { return n }
        let n = UInt32(names.count)
        names.append(key)
        numbers[key] = n
        return n
    }
}
