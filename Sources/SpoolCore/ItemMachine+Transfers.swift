import Foundation
import SpoolRequest

/// The rows of `ItemMachine`'s table for a start that could not be made and a transfer's end
/// (`couldNotStart`, `transferEnded`). Called from `handle` only: the table stays one.
extension ItemMachine {
    mutating func couldNotStart(_ problem: StartProblem, _ message: String, policy: RetryPolicy,
                                context: ItemContext) -> [Effect] {
        switch problem {
        case .diskFull:
            attempts -= 1
            state = .waitingForSpace(reason: message)
            return [.releaseSlot, .waitForSpace(reason: message)]
        case .shortOfResources:
            attempts -= 1
            return retry(at: context.now.addingTimeInterval(policy.shortageRetryDelay), holdHost: false)
        case .other:
            return [.releaseSlot] + fail("staging", "could not prepare the staging file: \(message)", context)
        }
    }

    mutating func transferEnded(_ end: TransferEnd, receipt: Receipt?, part: Part?, policy: RetryPolicy,
                                context: ItemContext) -> [Effect] {
        if let unchanged = end.notModified {
            state = .published(file: unchanged.file, marker: unchanged.marker, receipt: receipt)
            return [.releaseSlot, .ended]
        }
        // A signed URL refused (expired, revoked): a new one, once per attempt, keeping the slot
        // and the partial; a second refusal right after fails the item as any refusal does.
        if let status = end.fault?.httpStatus, status == 401 || status == 403 || status == 410,
           context.canRefreshURL, !context.stopping {
            return [.refreshURL(reason: "http-\(status)")]
        }
        guard let failure = end.fault else {
            let digest = end.sha256 ?? ""
            if let wanted = end.wantedSHA256, wanted != digest {
                return [.releaseSlot] + fail("sha256-mismatch",
                                             "sha256 of the body is \(digest), the request expects \(wanted)", context)
            }
            state = .publishing(job: nil, tries: 0, cancelAsked: nil)
            return [.releaseSlot, .publish(sha256: digest, part: part)]
        }
        // A 416 to a resume: either the partial already is the whole file, or start over.
        if failure.httpStatus == 416, end.hasPartial {
            if let digest = end.wholePartialSHA256 {
                state = .publishing(job: nil, tries: 0, cancelAsked: nil)
                return [.releaseSlot, .publish(sha256: digest, part: part)]
            }
            return [.discardPartial] + retry(at: context.now, holdHost: false)
        }
        if failure.diskFull, let why = end.neverFits {
            return [.releaseSlot] + fail("disk-full", why, context)
        }
        if failure.diskFull {
            // A full disk is not the item's fault: keep the partial, wait, do not count the attempt.
            attempts -= 1
            state = .waitingForSpace(reason: "\(failure)")
            return [.releaseSlot, .saveResumeState(part: part), .waitForSpace(reason: "\(failure)")]
        }
        // This source cannot serve it (gone, unresolvable, untrusted, or down too long): the next.
        if context.nextSource && !context.stopping && (failure.movesToNextSource || (end.outage && context.hostDownLong)) {
            if end.outage { attempts -= 1 }
            state = .queued
            return [.releaseSlot, .nextSource(part: part), .schedule]
        }
        var actions: [Effect] = []
        if failure.discardsPartial { actions.append(.discardPartial) }

        let withinDeadlineForOutage = context.now.timeIntervalSince(firstQueued) < policy.resourceTimeout
        if end.outage && withinDeadlineForOutage && !context.stopping {
            // Not reaching the server is not the item's fault: no attempt is used up, and the
            // whole host waits for its probe (the scheduler puts the item back in its queue).
            attempts -= 1
            state = .queued
            return actions + [.hostUnreachable(error: "\(failure)"), .saveResumeState(part: part)]
        }

        let withinAttempts = policy.maxAttempts == 0 || attempts < policy.maxAttempts
        let withinDeadline = context.now.timeIntervalSince(firstQueued) < policy.resourceTimeout
        // A host that paces its clients (429/503, see `HostPace`): not the item's fault either.
        if end.pacedRefusal && withinDeadline && !context.stopping {
            attempts -= 1
            return actions + retry(at: context.now, holdHost: false) + [.saveResumeState(part: part)]
        }
        if failure.isTransient && withinAttempts && withinDeadline && !context.stopping {
            let delay = policy.backoff.delay(afterAttempt: attempts, jitter: context.jitter, retryAfter: end.retryAfter)
            let holdHost = failure.httpStatus == 429 || failure.httpStatus == 503
            return actions + retry(at: context.now.addingTimeInterval(delay), holdHost: holdHost) + [.saveResumeState(part: part)]
        }
        if context.stopping && (failure.isTransient || failure.cancelled) {
            state = .queued      // picked up by the next run
            return actions + [.releaseSlot, .saveResumeState(part: part)]
        }
        var message = "\(failure)"
        if failure.isTransient && !withinAttempts { message += " (gave up after \(attempts) attempts)" }
        if failure.isTransient && !withinDeadline { message += " (resource timeout reached)" }
        if failure.tooLarge, let hint = end.tooLargeHint { message += hint }
        return actions + [.releaseSlot] + fail(failure.code, message, context)
    }
}
