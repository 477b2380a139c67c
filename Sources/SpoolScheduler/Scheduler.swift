import Foundation
import HeapModule

/// The pure scheduling state machine: a timer heap for items that may not start yet, per-host
/// ready queues ordered by priority → earliest start → arrival, and the running set.
///
/// It does no I/O and reads no clock: every call takes `now`, so tests of windows, back-off and
/// priorities run in microseconds. The engine calls `nextActions(now:)` after any change and sleeps
/// until `nextWakeup(now:)`.
public struct Scheduler: Sendable {
    public private(set) var configuration: SchedulerConfiguration
    private let timeZone: TimeZone

    /// Items that must not start before `notBefore` (earliest start, retry back-off).
    var future = Heap<TimedEntry>()
    /// Ready, non-discretionary items per host.
    var ready: [String: Heap<ReadyEntry>] = [:]
    /// Ready discretionary items per host.
    var readyDiscretionary: [String: Heap<ReadyEntry>] = [:]
    var readyCount = 0
    var readyDiscretionaryCount = 0
    /// Running items, the connections they hold per host, and segmented items' extra ones.
    var running: [ItemKey: ReadyEntry] = [:]
    /// Items running without a transfer that gave their connection back (`park`): an item
    /// waiting for another item's fetch of the same content. Held, counted against no limit.
    var parked: [ItemKey: ReadyEntry] = [:]
    var connections: HostConnections
    var segmentConnections: [ItemKey: Int] = [:]
    /// Hosts backed off (Retry-After, repeated 429/503) until a time.
    var hostHolds: [String: Double] = [:]
    /// Hosts that could not be reached (see `HostOutage.swift`).
    var outages: [String: HostOutage] = [:]
    /// The host of every item the scheduler holds (queued, waiting for a time, or running), and
    /// how many it holds per host: a host's outage record and hold go with its last item, so no
    /// host is shown unreachable (and probed) for work that no longer exists.
    private var liveHosts: [ItemKey: UInt32] = [:]
    private var liveCounts: [UInt32: Int] = [:]
    /// Hosts that limit their clients' rate, and every host's recent starts (see `HostPacing.swift`).
    var paces: [String: HostPace] = [:]
    var starts: [UInt32: RecentStarts] = [:]
    /// The `now` of the last `nextActions` (see `nextPacedStart`).
    var decidedAt: Double = 0
    /// HTTP/1.1 hosts' adaptive connection limits, and what measures them (`HostConnectionLimit.swift`).
    var limits: [String: HostConnectionLimit] = [:]
    @usableFromInline var limitChanges: Set<String> = []
    var startedAt: [ItemKey: Double] = [:]
    var endedSince: [(String, Double)] = []
    /// Items in a heap, with the arrival number of their live entry. An entry whose number does
    /// not match (the item was removed, or removed and submitted again) is stale and skipped
    /// when it surfaces: removal is O(1) and never searches a heap.
    var queued: [ItemKey: UInt64] = [:]
    /// Arrival counter: the last tie-breaker, so equal items run first-come first-served.
    private var arrivals: UInt64 = 0
    /// Host keys by number (`HostNumbers`): an entry keeps a 4-byte number, not the string.
    private var hosts = HostNumbers()

    /// New limits and window (a configuration reload). Running items keep running; the new
    /// limits apply to what starts next.
    public mutating func reconfigure(_ configuration: SchedulerConfiguration) {
        self.configuration = configuration
        connections.setStreams(configuration.maxStreams)
    }

    public init(configuration: SchedulerConfiguration, timeZone: TimeZone = .current) {
        self.configuration = configuration
        self.timeZone = timeZone
        connections = HostConnections(streams: configuration.maxStreams)
    }

    // MARK: Queries

    public var runningCount: Int { running.count }
    /// Items waiting for a slot or for a time (earliest start, back-off).
    public var queuedCount: Int { queued.count }
    /// Nothing queued and nothing running.
    public var isIdle: Bool { running.isEmpty && queuedCount == 0 }
    public func isRunning(_ key: ItemKey) -> Bool { running[key] != nil }
    /// Connections the running transfers hold (what `concurrency` bounds).
    public var connectionsInUse: Int { connections.total }

    // MARK: Changes

    /// Queues an item. It starts when its earliest start has passed and a slot is free.
    public mutating func submit(_ item: ScheduledItem) {
        parked.removeValue(forKey: item.key)
        let host = hostNumber(item.hostKey)
        if let old = liveHosts.updateValue(host, forKey: item.key) {
            if old != host { forgetHost(old) ; liveCounts[host, default: 0] += 1 }
        } else {
            liveCounts[host, default: 0] += 1
        }
        arrivals += 1
        let entry = ReadyEntry(key: item.key, arrival: arrivals, start: item.earliestStart ?? 0,
                               host: host, priority: item.priority, discretionary: item.discretionary)
        if let start = item.earliestStart {
            insertFuture(TimedEntry(notBefore: start, entry: entry))
        } else {
            insertReady(entry)
        }
    }

    /// Puts an item that just ran back into the queue, not before `until` (retry back-off).
    /// The item keeps its original arrival order.
    public mutating func retry(_ key: ItemKey, notBefore until: Date) {
        if let entry = parked.removeValue(forKey: key) {
            return insertFuture(TimedEntry(notBefore: until.timeIntervalSince1970, entry: entry))
        }
        guard let entry = running.removeValue(forKey: key) else { return }
        releaseSlot(entry)
        insertFuture(TimedEntry(notBefore: until.timeIntervalSince1970, entry: entry))
    }

    /// Puts a running item back in the ready queue at once (paused by the operator or for space).
    public mutating func requeue(_ key: ItemKey) {
        if let entry = parked.removeValue(forKey: key) { return insertReady(entry) }
        guard let entry = running.removeValue(forKey: key) else { return }
        releaseSlot(entry)
        insertReady(entry)
    }

    /// The item's transfer ended for good (published, failed, cancelled): its slot is free.
    /// An item still queued ends too: a parked waiter that asked for a slot again (`unpark`) and
    /// was cancelled (or its deadline passed) before it got one must never start — a start the
    /// ended item ignores would hold its slot for ever (found by the simulation, issue 48).
    public mutating func finished(_ key: ItemKey) {
        if parked.removeValue(forKey: key) != nil { return forget(key) }
        guard let entry = running.removeValue(forKey: key) else {
            if queued.removeValue(forKey: key) != nil { forget(key) }
            return
        }
        noteEnd(key, host: hostKey(of: entry), succeeded: true)
        releaseSlot(entry)
        forget(key)
    }

    /// Removes a queued item (cancel). A running one is just released as `finished`.
    public mutating func remove(_ key: ItemKey) {
        if running[key] != nil || parked[key] != nil { finished(key); return }
        if queued.removeValue(forKey: key) != nil { compactIfMostlyStale() }
        forget(key)
    }

    /// The item is no longer the scheduler's: its host's records go with the host's last item.
    private mutating func forget(_ key: ItemKey) {
        guard let host = liveHosts.removeValue(forKey: key) else { return }
        forgetHost(host)
    }

    private mutating func forgetHost(_ host: UInt32) {
        let left = (liveCounts[host] ?? 1) - 1
        if left > 0 { liveCounts[host] = left; return }
        liveCounts.removeValue(forKey: host)
        let name = hosts.name(of: host)
        outages.removeValue(forKey: name)
        hostHolds.removeValue(forKey: name)
    }

    /// Whether the scheduler holds the item (queued, waiting for a time, or running).
    public func holds(_ key: ItemKey) -> Bool { liveHosts[key] != nil }

    /// The running item needs no connection for now (it waits for another item's fetch of the
    /// same content): its slot goes to the next item at once. It stays the scheduler's (held,
    /// never preempted) until `unpark` asks for a slot again or it ends (`finished`).
    public mutating func park(_ key: ItemKey) {
        guard let entry = running.removeValue(forKey: key) else { return }
        releaseSlot(entry)
        parked[key] = entry
    }

    /// A parked item needs a connection again: it queues, ready now in its arrival order, and
    /// `nextActions` starts it (`.start`) when a slot is free, as any item.
    public mutating func unpark(_ key: ItemKey) {
        guard let entry = parked.removeValue(forKey: key) else { return }
        insertReady(entry)
    }

    public func isParked(_ key: ItemKey) -> Bool { parked[key] != nil }

    /// Items the scheduler holds for `hostKey`.
    public func itemCount(ofHost hostKey: String) -> Int {
        hosts.knownNumber(hostKey).flatMap { liveCounts[$0] } ?? 0
    }

    /// What a response of the host came over, HTTP/2 (`multiplexes`) or HTTP/1.x, as soon as its
    /// headers arrive: the host's limit follows. Returns whether it changed.
    @discardableResult
    public mutating func hostSpoke(_ hostKey: String, multiplexes: Bool) -> Bool {
        connections.learn(hostKey, multiplexes: multiplexes)
    }

    /// Backs off a whole host: nothing new starts to it before `until`.
    public mutating func holdHost(_ hostKey: String, until: Date) {
        let t = until.timeIntervalSince1970
        hostHolds[hostKey] = max(hostHolds[hostKey] ?? 0, t)
    }

    /// Lifts a host's back-off (an operator's `retry`: the operator wins over a `Retry-After`).
    public mutating func releaseHold(_ hostKey: String) {
        hostHolds.removeValue(forKey: hostKey)
        paces[hostKey]?.holdUntil = 0
    }

    // MARK: Decisions

    /// Everything the engine should do at `now`: starts for free slots, pauses for preemption or
    /// a closing window. Call after every change and on every timer. `maxStarts` bounds the new
    /// starts of this call (the engine's open-file budget); items it leaves waiting are offered
    /// again at the next call, and a preemption happens only where a start is still allowed.
    public mutating func nextActions(now date: Date, maxStarts: Int = .max) -> [SchedulerAction] {
        let now = date.timeIntervalSince1970
        decidedAt = now
        measureEnds(now: now)
        var actions: [SchedulerAction] = []
        var starts = 0
        promoteDue(now: now)
        hostHolds = hostHolds.filter { $0.value > now }

        let windowOpen = configuration.window.map { $0.contains(date, in: timeZone) }

        // A closing window pauses the discretionary transfers it let in.
        if windowOpen == false {
            for (key, entry) in running where entry.discretionary {
                running.removeValue(forKey: key)
                releaseSlot(entry)
                insertReady(entry)
                actions.append(.pause(key))
            }
        }

        while starts < maxStarts {
            // A stream on a host's connection needs no free connection (`hostHasCapacity`).
            if let entry = popBest(discretionary: false, now: now) {
                start(entry, now: now, &actions)
                starts += 1
                continue
            }
            let discretionaryAllowed: Bool
            if let open = windowOpen {
                discretionaryAllowed = open
            } else {
                // Without a window: only when no other item is waiting for a slot.
                discretionaryAllowed = readyCount == 0
            }
            if discretionaryAllowed,
               let entry = popBest(discretionary: true, now: now) {
                start(entry, now: now, &actions)
                starts += 1
                continue
            }
            // No free connection: a ready high item may pause a running low or discretionary one.
            guard connections.total >= configuration.concurrency, configuration.highPreempts,
                  let candidate = peekBest(in: ready, now: now, ignoringHostLimit: true), candidate.priority == .high,
                  let victim = preemptionVictim(forHost: hostKey(of: candidate)) else { break }
            running.removeValue(forKey: victim.key)
            releaseSlot(victim)
            insertReady(victim)
            actions.append(.pause(victim.key))
        }
        return actions
    }

    /// When the engine must next call `nextActions` even if nothing else happens; nil when no
    /// timer is needed (an idle daemon then sleeps without wake-ups).
    public func nextWakeup(now date: Date) -> Date? {
        let now = date.timeIntervalSince1970
        var next: Double? = nil
        func consider(_ t: Double) { next = min(next ?? t, t) }
        if let top = future.min { consider(top.notBefore) }
        for (host, until) in hostHolds where until > now {
            if (ready[host]?.count ?? 0) > 0 || (readyDiscretionary[host]?.count ?? 0) > 0 { consider(until) }
        }
        if let probe = nextProbeDue(), probe > now { consider(probe) }
        if let paced = nextPacedStart(now: now) { consider(paced) }
        if let window = configuration.window {
            let waitingDiscretionary = readyDiscretionaryCount > 0
            let runningDiscretionary = running.values.contains { $0.discretionary }
            if waitingDiscretionary || runningDiscretionary {
                consider(window.nextTransition(after: date, in: timeZone).timeIntervalSince1970)
            }
        }
        return next.map { Date(timeIntervalSince1970: $0) }
    }

    // MARK: Internals

    private mutating func start(_ entry: ReadyEntry, now: Double, _ actions: inout [SchedulerAction]) {
        let host = hostKey(of: entry)
        running[entry.key] = entry
        if !outages.isEmpty, outages[host] != nil { outages[host]!.probe = entry.key }
        pacedStart(host, number: entry.host, now: now)
        noteStart(entry.key, host: host, now: now)
        connections.add(host)
        actions.append(.start(entry.key))
    }

    /// The host key an entry's number stands for.
    func hostKey(of entry: ReadyEntry) -> String { hosts.name(of: entry.host) }

    /// The number `key` has in the host table, if it has one.
    func knownHostNumber(_ key: String) -> UInt32? { hosts.knownNumber(key) }

    private mutating func hostNumber(_ key: String) -> UInt32 { hosts.number(key) }

    mutating func releaseSlot(_ entry: ReadyEntry) {
        let host = hostKey(of: entry)
        releaseProbe(entry.key, host: host)
        releaseSegments(entry)
        noteEnd(entry.key, host: host, succeeded: false)
        connections.remove(host)
    }

    private mutating func insertFuture(_ timed: TimedEntry) {
        queued[timed.entry.key] = timed.entry.arrival
        future.insert(timed)
    }

    mutating func insertReady(_ entry: ReadyEntry) {
        queued[entry.key] = entry.arrival
        let host = hostKey(of: entry)
        if entry.discretionary {
            readyDiscretionary[host, default: Heap()].insert(entry)
            readyDiscretionaryCount += 1
        } else {
            ready[host, default: Heap()].insert(entry)
            readyCount += 1
        }
    }

    private mutating func promoteDue(now: Double) {
        while let top = future.min, top.notBefore <= now {
            let entry = future.removeMin().entry
            guard queued[entry.key] == entry.arrival else { continue }   // stale
            insertReady(entry)
        }
    }

    private func hostHasCapacity(_ host: String, now: Double, ignoringHostLimit: Bool = false) -> Bool {
        if let until = hostHolds[host], until > now { return false }
        if !outageAllowsStart(host, now: now) { return false }
        if !paceAllowsStart(host, now: now) { return false }
        if ignoringHostLimit { return true }
        guard connections.hostHasRoom(host, perHost: connectionLimit(host)) else { return false }
        return connections.added(by: host) == 0 || connections.total < configuration.concurrency
    }

    /// The best ready entry among hosts that may take one more transfer. O(hosts).
    private func peekBest(in queues: [String: Heap<ReadyEntry>], now: Double,
                          ignoringHostLimit: Bool = false) -> ReadyEntry? {
        var best: ReadyEntry? = nil
        for (host, heap) in queues {
            guard let top = heap.min, hostHasCapacity(host, now: now, ignoringHostLimit: ignoringHostLimit) else { continue }
            if best == nil || top < best! { best = top }
        }
        return best
    }

    private mutating func popBest(discretionary: Bool, now: Double) -> ReadyEntry? {
        while let best = peekBest(in: discretionary ? readyDiscretionary : ready, now: now) {
            let host = hostKey(of: best)
            if discretionary {
                _ = readyDiscretionary[host]!.removeMin()
                if readyDiscretionary[host]!.isEmpty { readyDiscretionary.removeValue(forKey: host) }
                readyDiscretionaryCount -= 1
            } else {
                _ = ready[host]!.removeMin()
                if ready[host]!.isEmpty { ready.removeValue(forKey: host) }
                readyCount -= 1
            }
            guard queued[best.key] == best.arrival else { continue }   // stale
            queued.removeValue(forKey: best.key)
            return best
        }
        return nil
    }

    /// A running low-priority or discretionary item whose pause frees a slot usable by `host`.
    private func preemptionVictim(forHost host: String) -> ReadyEntry? {
        let hostFull = !connections.hostHasRoom(host, perHost: configuration.perHost)
        let candidates = running.values.filter {
            ($0.discretionary || $0.priority == .low) && (!hostFull || hostKey(of: $0) == host)
        }
        // Pause the least urgent, most recently arrived first.
        return candidates.max { a, b in a < b }
    }
}
