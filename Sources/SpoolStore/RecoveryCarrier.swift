import Foundation

/// One adopted item's staging files and publish pipeline, as `RecoveryCarrier` reaches them.
/// The daemon's `Recovery` answers from the disk (and logs), the seeded simulator from its
/// simulated spool: both carry a plan out by the one carrier, so a fix to it is made once and
/// is under the seeds' reach.
public protocol RecoveryCarrierPorts {
    /// What the publish pipeline takes (the daemon's `PublishJob`).
    associatedtype Job
    /// `staging/B.voided` exists: a dead adopter removed the item's published file as unverified.
    var hasVoid: Bool { get }
    /// The item has (or may have) staging files its group end must remove.
    func noteStateFile()
    /// `staging/B.state` and `B.part` go; `B.voided` stays.
    func removeStaging()
    /// The kept part is cut back to its first `bytes`.
    func truncatePart(to bytes: Int64) throws
    /// A job that publishes the item from `state` and `marker`: its staging part (kept, or a new
    /// empty one when the data is in the final folder already, `alreadyPublishedAs`). nil when
    /// there is no staging file to carry.
    func makeJob(state: ItemState, marker: ItemMarker, alreadyPublishedAs: String?) -> Job?
    /// `staging/B.voided` written from `state` and synced, before `file` (published) goes.
    func writeVoided(_ state: ItemState, removing file: String) throws
    /// The data file `file` in the final folder goes.
    func removePublished(_ file: String)
}

/// What a resumed item keeps: where its next attempt resumes from and with which validators.
public struct RecoveredResume: Equatable, Sendable {
    public let bytes: Int64
    public let etag: String?
    public let lastModified: String?
    /// A segmented part's kept ranges (`RecoveryPlanner.keptRanges`).
    public let ranges: [[Int64]]?
    /// The refresh hook's last URL, as the state recorded it (validated again by the caller).
    public let refreshedURL: String?
    public init(bytes: Int64, etag: String?, lastModified: String?, ranges: [[Int64]]?, refreshedURL: String?) {
        self.bytes = bytes; self.etag = etag; self.lastModified = lastModified
        self.ranges = ranges; self.refreshedURL = refreshedURL
    }
}

/// Where an adopted item stands once its plan has been carried out: the phase its machine is
/// made in, with what that phase needs. Attempts carry over in every case.
public enum RecoveryOutcome<Job> {
    /// Queued afresh (`resume` nil) or to resume its kept part.
    case queued(attempts: Int, resume: RecoveredResume?)
    /// It had failed for good and ends failed again, with its record.
    case failed(ItemFailure, attempts: Int)
    /// It ends published as `file`. `marker`: the journaled marker's facts renamed to `file` (a
    /// group marker's line is written from them). `confirm`: the record to journal as published
    /// when the one it was recovered from does not say so (phase `ready`).
    case published(file: String, attempts: Int, marker: ItemMarker?, confirm: ItemState?)
    /// Its job goes to the publisher; `wholePart`: the part is complete and this large.
    case publishing(Job, attempts: Int, wholePart: Int64?)
}

extension RecoveryOutcome: Equatable where Job: Equatable {}

/// Carries out a `RecoveryPlan` through its ports: which staging files go, in which order the
/// void and the removal of an unverified file happen, when a job is made. The rules, row by row:
///
/// | plan | carried out |
/// |---|---|
/// | any | the item is noted as having staging files when it has a record or a void (its group end removes them, the void included) |
/// | startOver | `B.state` and `B.part` removed (not `B.voided`: the dead journal line it voids is read again if this worker dies too); queued afresh |
/// | resume | the part cut to the planned bytes when larger and not segmented (else startOver); queued to resume |
/// | failed | ends failed with its record |
/// | published | ends published; confirmed when its record is `ready` |
/// | writeMarker | a marker-only job; queued (staging kept) when no staging file can carry it |
/// | publishPart | a job of the whole part; startOver when there is no part or record |
/// | discardUnverified | startOver, then a synced `B.voided`, then the file removed; left in place when the void cannot be written |
public enum RecoveryCarrier {
    public static func carry<P: RecoveryCarrierPorts>(_ plan: RecoveryPlan, facts: RecoveryFacts,
                                                      ports: P) -> RecoveryOutcome<P.Job> {
        let attempts = facts.state?.attempts ?? 0
        if facts.state != nil || ports.hasVoid { ports.noteStateFile() }
        switch plan {
        case .startOver:
            return startOver(attempts, ports)
        case .resume(let bytes, let etag, let lastModified):
            let ranges = RecoveryPlanner.keptRanges(facts)
            // After a power cut, past the synced prefix: cut off (not a segmented part's ranges).
            if ranges == nil, let size = facts.partSize, size > bytes {
                do { try ports.truncatePart(to: bytes) } catch { return startOver(attempts, ports) }
            }
            return .queued(attempts: attempts, resume: RecoveredResume(bytes: bytes, etag: etag, lastModified: lastModified,
                                                                       ranges: ranges, refreshedURL: facts.state?.refreshedURL))
        case .failed(let failure):
            return .failed(failure, attempts: attempts)
        case .published(let file):
            var marker = facts.state?.marker
            marker?.name = file
            guard var confirmed = facts.state, confirmed.phase != .published else {
                return .published(file: file, attempts: attempts, marker: marker, confirm: nil)
            }
            confirmed.phase = .published
            confirmed.finalName = file
            return .published(file: file, attempts: attempts, marker: marker, confirm: confirmed)
        case .writeMarker(let file, let marker):
            // The job needs a staging file to carry; the data itself is already in place.
            guard let state = facts.state, let job = ports.makeJob(state: state, marker: marker, alreadyPublishedAs: file) else {
                return .queued(attempts: attempts, resume: nil)
            }
            return .publishing(job, attempts: attempts, wholePart: nil)
        case .discardUnverified(let file, _, _):
            // The journal line naming the file outlives this worker: before the file goes, a synced
            // `B.voided` says that line holds no more, else a later adopter reads "file gone" as
            // consumed. Without it the file stays (it has no marker: no consumer takes it).
            let outcome = startOver(attempts, ports)
            guard let state = facts.state else { return outcome }
            do { try ports.writeVoided(state, removing: file) } catch { return outcome }
            ports.removePublished(file)
            return outcome
        case .publishPart(let marker):
            guard let size = facts.partSize, let state = facts.state,
                  let job = ports.makeJob(state: state, marker: marker, alreadyPublishedAs: nil) else {
                return startOver(attempts, ports)
            }
            return .publishing(job, attempts: attempts, wholePart: size)
        }
    }

    /// Nothing usable: the item's staging files go and it is queued afresh, its attempts kept.
    private static func startOver<P: RecoveryCarrierPorts>(_ attempts: Int, _ ports: P) -> RecoveryOutcome<P.Job> {
        ports.removeStaging()
        return .queued(attempts: attempts, resume: nil)
    }
}
