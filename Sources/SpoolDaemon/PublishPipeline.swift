import Foundation
import SpoolStore

/// Verified items on their way into the final folder: queued, handed to the publisher in
/// batches (one batch at a time, on the I/O queue), and tried again later when a batch failed.
///
/// Batching is what keeps the durability promise affordable: one journal and one sync per
/// batch instead of several serial fsyncs per file (see `Publisher`).
final class PublishPipeline {
    private let publisher: Publisher
    private let io: IOQueue
    private var queue: [PublishJob] = []
    private var retries = DueTimers<PublishJob>()
    /// A batch is on the I/O queue.
    private(set) var inFlight = false

    init(publisher: Publisher, io: IOQueue) {
        self.publisher = publisher
        self.io = io
    }

    /// Nothing queued, in flight or waiting to be tried again.
    var isIdle: Bool { queue.isEmpty && !inFlight && retries.isEmpty }
    var nextRetry: Date? { retries.next }

    func enqueue(_ job: PublishJob) { queue.append(job) }

    /// Tries a failed job again at `at`; only its marker when the data already went through.
    func retry(_ job: PublishJob, at: Date) { retries.add(job, at: at) }

    /// Forgets a job of an item that ended otherwise (cancelled while its retry waited).
    func drop(base: String) {
        queue.removeAll { $0.part.base == base }
        retries.removeAll { $0.part.base == base }
    }

    /// Moves due retries to the queue and hands the queue to the publisher unless a batch is
    /// already in flight (the next batch then collects everything that finished meanwhile).
    func kick(now: Date) {
        queue.append(contentsOf: retries.takeDue(now: now))
        guard !inFlight, !queue.isEmpty else { return }
        let jobs = queue
        queue.removeAll(keepingCapacity: true)
        inFlight = true
        let publisher = self.publisher
        io.submit { .published(publisher.publish(jobs)) }
    }

    /// The batch's results came back.
    func batchEnded() {
        inFlight = false
        io.completed()
    }
}
