import Foundation
import SpoolRequest

/// The rows of `ItemMachine`'s table for an operator's command and the deadline, and the two
/// endings every row uses (a back-off, a failure). Called from `handle` only: the table stays one.
extension ItemMachine {
    /// An operator's command, and the deadline (which ends the item as `cancel` does, with its
    /// own code).
    mutating func operatorCommand(_ verb: OperatorVerb, code: String, message: String,
                                  context: ItemContext) -> [Effect] {
        switch (verb, state) {
        case (.cancel, .running(let part)):
            return [.stopTransfer(part: part), .releaseSlot] + fail(code, message, context)
        case (.cancel, .queued), (.cancel, .retrying), (.cancel, .paused):
            return [.unschedule] + fail(code, message, context)
        case (.cancel, .waitingForSpace):
            return [.leaveSpaceQueue] + fail(code, message, context)
        case (.cancel, .publishing(let job, let tries, nil)):
            state = .publishing(job: job, tries: tries, cancelAsked: code)
            return [.withdrawPublish]
        case (.cancel, .waitingToPublish):
            return [.leaveSpaceQueue] + fail(code, message, context)
        case (.pause, .queued), (.pause, .retrying):
            state = .paused
            return [.unschedule]
        case (.pause, .waitingForSpace):
            state = .paused
            return [.leaveSpaceQueue]
        case (.pause, .running(let part)):
            // The operator cut it, not a failure: the attempt it was making is not used up, so
            // pausing and resuming never counts toward `--max-attempts` (the resume makes it again).
            state = .paused
            attempts -= 1
            return [.stopTransfer(part: part), .saveResumeState(part: part), .releaseSlot]
        case (.resume, .paused):
            state = .queued
            return [.schedule]
        case (.retry, .retrying):
            state = .queued
            return [.unschedule, .schedule]
        case (.retry, .waitingForSpace):
            state = .queued
            return [.leaveSpaceQueue, .schedule]
        case (.retry, .waitingToPublish(let job, let tries, _)):
            state = .publishing(job: job, tries: tries, cancelAsked: nil)
            return [.leaveSpaceQueue, .retryPublish(at: context.now, job: job)]
        default:
            return []
        }
    }

    /// Back off until `at`: the phase keeps the time, so that status names it.
    mutating func retry(at: Date, holdHost: Bool) -> [Effect] {
        state = .retrying(until: at)
        return [.retry(at: at, holdHost: holdHost)]
    }

    /// Ends the item failed, its record whole: the code and message decided here, the attempts
    /// used, and the facts the shell gives about its URL and last response.
    mutating func fail(_ code: String, _ message: String, _ context: ItemContext) -> [Effect] {
        var failed = ItemFailed(code: code, message: message, attempts: attempts, facts: context.failureFacts())
        if ItemCause.applies(to: code) {
            let decided = cause(facts: failed.facts, shell: failed.facts.cause)
            failed.causeStorage = context.causeSharing?.shared(decided) ?? SharedCause(decided)
        }
        // What a cause is decided from is not kept: a failed phase lives until its group ends,
        // and 200,000 copies of an item's status facts cost 50 MB.
        failed.facts.cause = nil
        // The phase it leaves (still `state` here: every row fails before it changes the phase).
        let wasPublishing: Bool
        switch state {
        case .publishing, .waitingToPublish: wasPublishing = true
        default: wasPublishing = false
        }
        state = .failed(failed)
        return [.fail(failed, wasPublishing: wasPublishing)]
    }
}
