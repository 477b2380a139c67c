import Foundation
import SpoolRequest
import SpoolScheduler

/// What `spoolfetch status` says of one item: its state, and the one thing that moves it on.
/// Decided here, from the item's state and the facts its rooms hold, so that the daemon's report
/// and the simulator's check come from the same rule: an item that has not ended names its exit
/// (a time, a host, the space on a filesystem, the window, the operator) or is in an effect
/// (running, publishing).
public struct ItemStatus: Sendable, Hashable {
    /// `pending`, `waiting-start`, `waiting-window`, `waiting-space`, `running`, `retrying`,
    /// `paused`, `publishing`, `done`, `failed` (the shell adds `waiting-store`).
    public var state: String
    /// `waiting-start`: its earliest start; `retrying`: when its back-off ends.
    public var startsAt: Date?
    /// The condition it waits on, in words.
    public var waitingFor: String?

    public init(state: String, startsAt: Date? = nil, waitingFor: String? = nil) {
        self.state = state
        self.startsAt = startsAt
        self.waitingFor = waitingFor
    }

    /// Where a queued item stands: the one rule for a listed item and for the queue's counts
    /// (which a million waiting items make a hot loop: plain values in, no allocation).
    public enum Queued: String, Sendable {
        case waitingStart = "waiting-start"
        case waitingWindow = "waiting-window"
        case pending
    }

    @inline(__always)
    public static func queued(earliestStart: Double, discretionary: Bool, windowClosed: Bool, now: Double) -> Queued {
        if earliestStart > now { return .waitingStart }
        if discretionary && windowClosed { return .waitingWindow }
        return .pending
    }

    /// How a host's wait reads in a status line.
    public static func describe(_ wait: HostWait, host: String) -> String {
        switch wait {
        case .unreachable(let outage):
            return "host \(host) unreachable since \(RFC3339.format(outage.since)); next probe \(RFC3339.format(outage.nextProbe))"
        case .backedOff(let until):
            return "host \(host) backed off until \(RFC3339.format(until))"
        }
    }

    /// What a paused item waits for.
    public static let pausedWaitsFor = "the operator: spoolfetch resume (or cancel)"
}

/// The facts, besides its state, that an item's status is decided from.
public struct ItemStatusFacts: Sendable, Hashable {
    public var now: Date
    public var earliestStart: Date?
    public var discretionary: Bool
    /// The discretionary window and the time zone it is read in; nil: none.
    public var window: DailyWindow?
    public var timeZone: TimeZone
    /// The host it is scheduled for (`host:port`) and what holds that host back, if anything.
    public var hostKey: String
    public var hostWait: HostWait?
    /// For an item waiting for space: what the space gate finds short now (folder, filesystem,
    /// free, needed); nil: nothing short any more (the gate's next look lets it go on) or not known.
    public var space: SpaceShortage?

    public init(now: Date, earliestStart: Date?, discretionary: Bool, window: DailyWindow?, timeZone: TimeZone,
                hostKey: String, hostWait: HostWait?, space: SpaceShortage? = nil) {
        self.now = now
        self.earliestStart = earliestStart
        self.discretionary = discretionary
        self.window = window
        self.timeZone = timeZone
        self.hostKey = hostKey
        self.hostWait = hostWait
        self.space = space
    }
}

extension ItemMachine {
    /// The item as status shows it.
    public func status(_ facts: ItemStatusFacts) -> ItemStatus {
        let held = facts.hostWait.map { ItemStatus.describe($0, host: facts.hostKey) }
        switch state {
        case .queued:
            let closed = facts.window.map { !$0.contains(facts.now, in: facts.timeZone) } ?? false
            switch ItemStatus.queued(earliestStart: facts.earliestStart?.timeIntervalSince1970 ?? 0,
                                     discretionary: facts.discretionary, windowClosed: closed,
                                     now: facts.now.timeIntervalSince1970) {
            case .waitingStart:
                return ItemStatus(state: "waiting-start", startsAt: facts.earliestStart)
            case .waitingWindow:
                let opens = facts.window.map { RFC3339.format($0.nextTransition(after: facts.now, in: facts.timeZone)) }
                return ItemStatus(state: "waiting-window",
                                  waitingFor: "the discretionary window \(facts.window.map { "\($0)" } ?? ""), opens \(opens ?? "")")
            case .pending:
                return ItemStatus(state: "pending", waitingFor: held)
            }
        case .retrying(let until):
            return ItemStatus(state: "retrying", startsAt: until, waitingFor: held)
        case .waitingForSpace(let reason), .waitingToPublish(_, _, let reason):
            return ItemStatus(state: "waiting-space", waitingFor: "space on " + (facts.space.map { "\($0)" } ?? reason))
        case .paused:
            return ItemStatus(state: "paused", waitingFor: ItemStatus.pausedWaitsFor)
        case .running, .publishing, .published, .failed:
            return ItemStatus(state: phase.label)
        }
    }
}
