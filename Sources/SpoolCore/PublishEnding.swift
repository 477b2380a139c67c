import Foundation

/// What a publish batch did for one item: the facts of its result that decide the item's event.
public enum PublishOutcome: Sendable, Hashable {
    /// Published as `file` (the name it got in the final folder); `marker`: the path of its
    /// marker, nil when none is written for the file (`markers: group`).
    case published(file: String, marker: String?)
    /// Not published. `finalName`: what the batch got done before it failed — the data renamed
    /// into the final folder under that name, its marker not in place; nil: the data is still in
    /// staging. `permanent` and `diskFull`: the error's kind; `message`: its text (path, syscall,
    /// errno).
    case failed(finalName: String?, permanent: Bool, diskFull: Bool, message: String)
}

/// An item's publish job and staging part, as `PublishEnding` reaches them. The daemon's
/// `Publishing` answers from the disk (and logs), the seeded simulator from its simulated spool:
/// both turn a batch's result into the item's event by the one rule, so a fix to it is made once
/// and is under the seeds' reach.
public protocol PublishEndingPorts {
    /// The item as the shell knows it (the daemon's record, the simulator's number).
    associatedtype Item
    /// What the publisher takes (the daemon's `PublishJob`).
    associatedtype Job
    /// The record of a published file its published phase keeps (`ItemEvent`'s `Receipt`).
    associatedtype Receipt
    /// The job's part has its name in staging (`B.part`). An unnamed part (`O_TMPFILE`) is held
    /// open by the job: it cannot be gone, and a restart cannot find it.
    func partIsNamed(_ job: Job) -> Bool
    /// The item's part is still in staging under its name.
    func partExists(_ item: Item, _ job: Job) -> Bool
    /// Gives the job's unnamed part its staging name, so a restart finds it (asked only for an
    /// unnamed part).
    func namePart(_ item: Item, _ job: Job) throws
    /// The job, handed back with what the batch got done: its data already in the final folder
    /// as `file` (nil: not there), so that its next try writes only the marker.
    func handedBack(_ job: Job, alreadyPublishedAs file: String?) -> Job
    /// Why the job's body can never fit the final folder's filesystem (larger than it less
    /// `min-free`); nil when freeing space there can let it in.
    func neverFits(_ job: Job) -> String?
    /// The published file's record for the item's published phase to keep (asked only when no
    /// marker was written for the file: the group marker is written from it).
    func receipt(_ item: Item, _ job: Job, file: String) -> Receipt?
    /// The part could not be named (logged; the item still waits for its next try).
    func namingFailed(_ item: Item, _ error: any Error)
    /// The publish failed with `message` (logged).
    func publishFailed(_ item: Item, message: String)
}

/// Turns what a publish batch did for one item (`PublishOutcome`) into the event its machine
/// takes, and names its part when it waits for another try. The rules, row by row:
///
/// | outcome | event |
/// |---|---|
/// | published, with a marker | `publishSucceeded(file, marker)`, no receipt (the marker holds the facts) |
/// | published, no marker (`markers: group`) | `publishSucceeded(file, "")` with the ports' receipt |
/// | failed, data in the final folder (`finalName`) | `publishFailed`, the job handed back with `alreadyPublishedAs = finalName`: its retry writes only the marker |
/// | failed, data in staging, part named and gone | `publishFailed`, `partGone` (an unnamed part, held open, is never gone) |
/// | failed, data in staging, part unnamed, not permanent | the part named in staging (a restart publishes it from there instead of downloading it again; a naming failure is logged), `publishFailed` |
/// | failed, disk full | `diskFull`; `neverFits` and the message + "; " + the reason when the body can never fit there |
///
/// Why in the core: the daemon's `Publishing` and the simulator's workers used to build these
/// events each on their own, so a bug in the mapping (a part gone that was only unnamed, the
/// naming skipped, `alreadyPublishedAs` lost) was out of the seeds' reach.
public enum PublishEnding {
    public static func event<P: PublishEndingPorts, Part>(_ outcome: PublishOutcome, job: P.Job, of item: P.Item,
                                                          ports: P) -> ItemEvent<Part, P.Job, P.Receipt> {
        switch outcome {
        case .published(let file, let marker):
            // Kept by the published phase for the group marker (only then: a per-file marker
            // already holds the facts).
            let receipt = marker == nil ? ports.receipt(item, job, file: file) : nil
            return .publishSucceeded(file: file, marker: marker ?? "", receipt: receipt)
        case .failed(let finalName, let permanent, let diskFull, var message):
            let job = ports.handedBack(job, alreadyPublishedAs: finalName)
            var partGone = false
            if finalName == nil {
                // An unnamed part cannot be gone: the job holds it open.
                let named = ports.partIsNamed(job)
                partGone = named && !ports.partExists(item, job)
                if !named && !permanent {
                    // It waits for another try: named, a restart in between publishes it from
                    // staging (the batch journal has it) instead of downloading it again.
                    do { try ports.namePart(item, job) } catch { ports.namingFailed(item, error) }
                }
            }
            let never = diskFull ? ports.neverFits(job) : nil
            if let never { message += "; " + never }
            ports.publishFailed(item, message: message)
            return .publishFailed(PublishFault(partGone: partGone, permanent: permanent, diskFull: diskFull,
                                               neverFits: never != nil, message: message), job: job)
        }
    }
}
