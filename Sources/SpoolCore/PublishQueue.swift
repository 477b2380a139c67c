import Foundation

/// The publishing room's queue: verified items' jobs waiting for a batch, failed ones waiting
/// for their retry time, and whether a batch is with the publisher. The daemon's `Publishing`
/// and the simulator both keep their jobs here, so the seeds check the rules the daemon runs:
/// one batch at a time (a batch's journal and sync serve every job that finished meanwhile);
/// due retries join the next batch; a job leaves the queue when its item ends otherwise, and a
/// cancel takes it back only while no batch holds it (a batch publishes what it holds, and its
/// result then decides the item's end). Plain data, one owner, no I/O.
public struct PublishQueue<Job> {
    private var waiting: [Job] = []
    private var retries: [(at: Date, job: Job)] = []
    /// A batch is with the publisher: its result comes back through `batchEnded`.
    public private(set) var inFlight = false

    public init() {}

    /// Nothing waits, is in flight or waits to be tried again.
    public var isIdle: Bool { waiting.isEmpty && !inFlight && retries.isEmpty }
    /// When the earliest failed job is due again; nil: none waits.
    public var nextRetry: Date? { retries.lazy.map(\.at).min() }
    /// When `takeBatch` next has something to give: now (`distantPast`) when jobs wait and no
    /// batch is in flight, else when the next retry is due; nil: nothing.
    public var handOverAt: Date? { !inFlight && !waiting.isEmpty ? .distantPast : nextRetry }

    /// A verified item's job (or one a recovery made) waits for the next batch.
    public mutating func add(_ job: Job) { waiting.append(job) }

    /// A failed job is tried again at `at`.
    public mutating func retry(_ job: Job, at: Date) { retries.append((at, job)) }

    /// Whether a job that matches waits (for a batch or its retry); one a batch holds does not.
    public func holds(where matches: (Job) -> Bool) -> Bool {
        waiting.contains(where: matches) || retries.contains { matches($0.job) }
    }

    /// Forgets the jobs that match (their item ended otherwise).
    public mutating func drop(where matches: (Job) -> Bool) {
        waiting.removeAll(where: matches)
        retries.removeAll { matches($0.job) }
    }

    /// Takes a cancelled item's job back if no batch holds it: false when none waits (a batch
    /// has it, and its result says how the item ends).
    public mutating func withdraw(where matches: (Job) -> Bool) -> Bool {
        guard holds(where: matches) else { return false }
        drop(where: matches)
        return true
    }

    /// The retries due at `now` join the waiting jobs; then, unless a batch is in flight, every
    /// waiting job goes to the publisher as one batch (nil: nothing to hand over now).
    public mutating func takeBatch(now: Date) -> [Job]? {
        if retries.contains(where: { $0.at <= now }) {
            waiting.append(contentsOf: retries.lazy.filter { $0.at <= now }.map(\.job))
            retries.removeAll { $0.at <= now }
        }
        guard !inFlight, !waiting.isEmpty else { return nil }
        let batch = waiting
        waiting.removeAll(keepingCapacity: true)
        inFlight = true
        return batch
    }

    /// The batch in flight reported: the next one may go.
    public mutating func batchEnded() { inFlight = false }
}
