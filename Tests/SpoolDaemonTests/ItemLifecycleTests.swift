import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore
import SpoolTransfer
import XCTest
@testable import SpoolDaemon

// The table is the core's machine, whatever the shell's part and job: these tests drive it over
// plain numbers for them, so that its effects (which carry the part and the job) compare as values.
private typealias ItemLifecycle = ItemMachine<Int, Int, Int>
private typealias LifecycleEvent = SpoolCore.ItemEvent<Int, Int, Int>
private typealias ItemAction = ItemEffect<Int, Int>

/// One test per row of `ItemLifecycle`'s transition table (and of its copy in docs/ARCHITECTURE.md).
final class ItemLifecycleTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let policy = RetryPolicy(maxAttempts: 3, resourceTimeout: 3600, backoff: .init(base: 1, cap: 60))
    var context: LifecycleContext { LifecycleContext(now: t0, stopping: false, jitter: 1) }

    private func lifecycle() -> ItemLifecycle {
        ItemLifecycle(firstQueued: t0)
    }

    /// A lifecycle driven to `running` (one attempt used).
    private func running() -> ItemLifecycle {
        var l = lifecycle()
        _ = l.handle(.submitted, policy: policy, context: context)
        _ = l.handle(.slotGranted(space: .fits), policy: policy, context: context)
        XCTAssertEqual(l.phase, .running)
        return l
    }

    private func end(_ failure: TransferFailure?, sha256: String? = nil, retryAfter: Double? = nil,
                     partial: Bool = false, whole: String? = nil, wanted: String? = nil, hint: String? = nil) -> LifecycleEvent {
        .transferEnded(TransferEnd(failure: failure, sha256: sha256, retryAfter: retryAfter, hasPartial: partial,
                                   wholePartialSHA256: whole, wantedSHA256: wanted, tooLargeHint: hint))
    }

    private func failCode(_ actions: [ItemAction]) -> String? {
        for a in actions { if let code = a.failCode { return code } }
        return nil
    }

    /// A `fail` action's code and message, as "code: message".
    private func failText(_ action: ItemAction?) -> String? {
        guard case .fail(let failed, _)? = action else { return nil }
        return "\(failed.code): \(failed.message)"
    }

    func testSubmittedIsQueued() {
        var l = lifecycle()
        XCTAssertEqual(l.handle(.submitted, policy: policy, context: context), [.schedule])
        XCTAssertEqual(l.phase, .queued)
    }

    func testSlotWithoutSpaceWaitsForSpaceAndFreesTheSlot() {
        var l = lifecycle()
        _ = l.handle(.submitted, policy: policy, context: context)
        let actions = l.handle(.slotGranted(space: .later(reason: "not enough free space for its expected size")), policy: policy, context: context)
        XCTAssertEqual(actions.first, .releaseSlot)
        guard case .waitForSpace = actions.last else { return XCTFail("\(actions)") }
        XCTAssertEqual(l.phase, .waitingForSpace)
        XCTAssertEqual(l.attempts, 0)
    }

    func testSlotWithSpaceStartsAndCountsAnAttempt() {
        var l = lifecycle()
        _ = l.handle(.submitted, policy: policy, context: context)
        XCTAssertEqual(l.handle(.slotGranted(space: .fits), policy: policy, context: context), [.prepareStart])
        XCTAssertEqual(l.phase, .running)
        XCTAssertEqual(l.attempts, 1)
        XCTAssertEqual(l.handle(.startChecked(StartCheck()), policy: policy, context: context), [.startTransfer(credentials: [])])
    }

    func testRetryingItemStartsWhenItsSlotComes() {
        var l = running()
        _ = l.handle(end(.httpStatus(500)), policy: policy, context: context)
        XCTAssertEqual(l.phase, .retrying)
        XCTAssertEqual(l.handle(.slotGranted(space: .fits), policy: policy, context: context), [.prepareStart])
        XCTAssertEqual(l.attempts, 2)
    }

    func testCouldNotStartOnAFullDiskWaitsWithoutUsingTheAttempt() {
        var l = running()
        let actions = l.handle(.couldNotStart(.diskFull, message: "ENOSPC"), policy: policy, context: context)
        XCTAssertEqual(actions, [.releaseSlot, .waitForSpace(reason: "ENOSPC")])
        XCTAssertEqual(l.phase, .waitingForSpace)
        XCTAssertEqual(l.attempts, 0)
    }

    func testCouldNotStartForWantOfDescriptorsRetriesWithoutUsingTheAttempt() {
        var l = running()
        let actions = l.handle(.couldNotStart(.shortOfResources, message: "EMFILE"), policy: policy, context: context)
        XCTAssertEqual(actions, [.retry(at: t0.addingTimeInterval(policy.shortageRetryDelay), holdHost: false)])
        XCTAssertEqual(l.phase, .retrying)
        XCTAssertEqual(l.attempts, 0)
    }

    func testStartProblemsByErrno() {
        XCTAssertEqual(StartProblem(errno: ENOSPC), .diskFull)
        XCTAssertEqual(StartProblem(errno: EDQUOT), .diskFull)
        for e in [EMFILE, ENFILE, ENOMEM, ENOBUFS] { XCTAssertEqual(StartProblem(errno: e), .shortOfResources, "errno \(e)") }
        XCTAssertEqual(StartProblem(errno: EACCES), .other)
        XCTAssertEqual(StartProblem(errno: nil), .other)
    }

    func testCouldNotStartOtherwiseFails() {
        var l = running()
        let actions = l.handle(.couldNotStart(.other, message: "EACCES"), policy: policy, context: context)
        XCTAssertEqual(actions.first, .releaseSlot)
        XCTAssertEqual(failCode(actions), "staging")
        XCTAssertTrue(l.phase.hasEnded)
    }

    func testAnExpiredURLFailsWithoutUsingAnAttempt() {
        var l = running()
        let actions = l.handle(.startChecked(StartCheck(expiresAt: t0.addingTimeInterval(-1), expirySource: "expires-key")),
                               policy: policy, context: context)
        XCTAssertEqual(actions.first, .releaseSlot)
        XCTAssertEqual(failCode(actions), "url-expired")
        XCTAssertTrue(l.phase.hasEnded)
        XCTAssertEqual(l.attempts, 0)
    }

    func testAURLNeedingRefreshAsksTheHookKeepingTheSlot() {
        var refreshable = context
        refreshable.canRefreshURL = true
        var expiring = running()
        XCTAssertEqual(expiring.handle(.startChecked(StartCheck(expiresAt: t0.addingTimeInterval(30))), policy: policy, context: refreshable),
                       [.refreshURL(reason: "expiring")])
        XCTAssertEqual(expiring.phase, .running)
        XCTAssertEqual(expiring.attempts, 1)
        var expired = running()
        XCTAssertEqual(expired.handle(.startChecked(StartCheck(expiresAt: t0)), policy: policy, context: refreshable),
                       [.refreshURL(reason: "expired")])
        var later = running()
        XCTAssertEqual(later.handle(.startChecked(StartCheck(expiresAt: t0.addingTimeInterval(3600))), policy: policy, context: refreshable),
                       [.startTransfer(credentials: [])], "outside --refresh-margin: the URL is used as it is")
        var noHook = running()
        XCTAssertEqual(noHook.handle(.startChecked(StartCheck(expiresAt: t0.addingTimeInterval(30))), policy: policy, context: context),
                       [.startTransfer(credentials: [])], "expiring but no hook to ask: the URL still works now")
    }

    func testUnusableCredentialsFailWithoutUsingAnAttemptAndUsableOnesGoWithTheStart() {
        var l = running()
        let actions = l.handle(.startChecked(StartCheck(credentialsRefused: "readable by others")), policy: policy, context: context)
        XCTAssertEqual(failCode(actions), "credentials")
        XCTAssertEqual(l.attempts, 0)
        var ok = running()
        let header = RequestHeader(name: "Authorization", value: "Bearer x")
        XCTAssertEqual(ok.handle(.startChecked(StartCheck(credentials: [header])), policy: policy, context: context),
                       [.startTransfer(credentials: [header])])
    }

    func testAnUnreadableDescriptionIsACouldNotStart() {
        var l = running()
        XCTAssertEqual(l.handle(.startChecked(StartCheck(loadProblem: .shortOfResources, loadMessage: "EMFILE")), policy: policy, context: context),
                       [.retry(at: t0.addingTimeInterval(policy.shortageRetryDelay), holdHost: false)])
        XCTAssertEqual(l.attempts, 0)
    }

    func testARefusalWithAHookNotYetAskedRefreshesTheURL() {
        var refreshable = context
        refreshable.canRefreshURL = true
        for status in [401, 403, 410] {
            var l = running()
            XCTAssertEqual(l.handle(end(.httpStatus(status), partial: true), policy: policy, context: refreshable),
                           [.refreshURL(reason: "http-\(status)")])
            XCTAssertEqual(l.phase, .running)
        }
        var other = running()
        XCTAssertEqual(failCode(other.handle(end(.httpStatus(404)), policy: policy, context: refreshable)), "http-status",
                       "a 404 is not about the URL's signature")
        var asked = running()
        XCTAssertEqual(failCode(asked.handle(end(.httpStatus(403)), policy: policy, context: context)), "http-status",
                       "a second refusal in the attempt (or no hook) fails as before")
        var stopping = refreshable
        stopping.stopping = true
        var l = running()
        XCTAssertFalse(l.handle(end(.httpStatus(403)), policy: policy, context: stopping).contains(.refreshURL(reason: "http-403")))
    }

    func testARefreshedURLStartsTheTransferAgainInTheSameAttempt() {
        var l = running()
        XCTAssertEqual(l.handle(.urlRefreshed, policy: policy, context: context), [.prepareStart])
        XCTAssertEqual(l.attempts, 1)
        XCTAssertEqual(l.phase, .running)
    }

    func testAFailedRefreshFailsTheItem() {
        var l = running()
        let actions = l.handle(.refreshFailed(message: "the refresh hook printed no URL"), policy: policy, context: context)
        XCTAssertEqual(actions.first, .releaseSlot)
        XCTAssertEqual(failCode(actions), "refresh-failed")
        XCTAssertTrue(l.phase.hasEnded)
    }

    func testPreemptedGoesBackToTheQueueKeepingItsPartial() {
        var l = running()
        XCTAssertEqual(l.handle(.preempted, policy: policy, context: context), [.stopTransfer(), .saveResumeState()])
        XCTAssertEqual(l.phase, .queued)
    }

    func testCompleteBodyIsPublished() {
        var l = running()
        XCTAssertEqual(l.handle(end(nil, sha256: "abc", wanted: "abc"), policy: policy, context: context),
                       [.releaseSlot, .publish(sha256: "abc")])
        XCTAssertEqual(l.phase, .publishing)
    }

    func testNotModifiedEndsPublishedWithTheExistingFileAndPublishesNothing() {
        var l = running()
        let unchanged = UnchangedFile(file: "f.csv", marker: "/spool/final/f.csv.done")
        let event = LifecycleEvent.transferEnded(TransferEnd(failure: nil, sha256: nil, retryAfter: nil, hasPartial: false,
                                                        notModified: unchanged), receipt: 304)
        XCTAssertEqual(l.handle(event, policy: policy, context: context), [.releaseSlot, .ended])
        XCTAssertEqual(l.phase, .published(file: "f.csv", marker: "/spool/final/f.csv.done"))
        XCTAssertEqual(l.state.receipt, 304, "the published phase keeps the existing file's receipt the event carried")
        XCTAssertEqual(l.attempts, 1)
        XCTAssertEqual(l.handle(end(nil, sha256: "abc"), policy: policy, context: context), [], "it has ended")
    }

    func testDigestMismatchFailsAndPublishesNothing() {
        var l = running()
        let actions = l.handle(end(nil, sha256: "def", wanted: "abc"), policy: policy, context: context)
        XCTAssertEqual(failCode(actions), "sha256-mismatch")
        XCTAssertFalse(actions.contains { if case .publish = $0 { return true } else { return false } })
    }

    func test416WithTheWholeFileKeptPublishesThePartial() {
        var l = running()
        XCTAssertEqual(l.handle(end(.httpStatus(416), partial: true, whole: "feed"), policy: policy, context: context),
                       [.releaseSlot, .publish(sha256: "feed")])
        XCTAssertEqual(l.phase, .publishing)
    }

    func test416OtherwiseStartsOverAtOnce() {
        var l = running()
        XCTAssertEqual(l.handle(end(.httpStatus(416), partial: true), policy: policy, context: context),
                       [.discardPartial, .retry(at: t0, holdHost: false)])
        XCTAssertEqual(l.phase, .retrying)
    }

    func testFullDiskDuringTheBodyWaitsForSpaceWithoutUsingTheAttempt() {
        var l = running()
        let actions = l.handle(end(.write(errno: ENOSPC), partial: true), policy: policy, context: context)
        XCTAssertEqual(Array(actions.prefix(2)), [.releaseSlot, .saveResumeState()])
        XCTAssertEqual(l.phase, .waitingForSpace)
        XCTAssertEqual(l.attempts, 0)
    }

    func testTransientFailureRetriesWithBackoff() {
        var l = running()
        let actions = l.handle(end(.curl(code: 56, text: "reset")), policy: policy, context: context)
        XCTAssertEqual(actions, [.retry(at: t0.addingTimeInterval(1), holdHost: false), .saveResumeState()])
        XCTAssertEqual(l.phase, .retrying)
    }

    func testServerAskingForAPauseHoldsTheHostAndRetryAfterWins() {
        var l = running()
        let actions = l.handle(end(.httpStatus(503), retryAfter: 30), policy: policy, context: context)
        XCTAssertEqual(actions, [.retry(at: t0.addingTimeInterval(30), holdHost: true), .saveResumeState()])
    }

    func testRangeMismatchDiscardsThePartialBeforeRetrying() {
        var l = running()
        let actions = l.handle(end(.rangeMismatch(asked: 10, got: 0), partial: true), policy: policy, context: context)
        XCTAssertEqual(actions.first, .discardPartial)
        XCTAssertEqual(l.phase, .retrying)
    }

    func testAResumeAnsweredWithAnotherVersionDiscardsThePartialBeforeRetrying() {
        var l = running()
        let actions = l.handle(end(.resourceChanged(sent: "\"a\"", got: "\"b\""), partial: true), policy: policy, context: context)
        XCTAssertEqual(actions.first, .discardPartial)
        XCTAssertEqual(l.phase, .retrying)
    }

    func testTransientFailureGivesUpAfterMaxAttempts() {
        var l = running()
        for _ in 1..<3 {
            _ = l.handle(end(.httpStatus(500)), policy: policy, context: context)
            _ = l.handle(.slotGranted(space: .fits), policy: policy, context: context)
        }
        XCTAssertEqual(l.attempts, 3)
        let actions = l.handle(end(.httpStatus(500)), policy: policy, context: context)
        XCTAssertEqual(failCode(actions), "http-status")
        guard case .fail(let failed, _)? = actions.last else { return XCTFail() }
        let message = failed.message
        XCTAssertTrue(message.contains("gave up after 3 attempts"), message)
    }

    func testTransientFailureGivesUpAfterTheResourceTimeout() {
        var l = running()
        let late = LifecycleContext(now: t0.addingTimeInterval(3601), stopping: false, jitter: 1)
        let actions = l.handle(end(.httpStatus(500)), policy: policy, context: late)
        guard case .fail(let failed, _)? = actions.last else { return XCTFail("\(actions)") }
        let message = failed.message
        XCTAssertTrue(message.contains("resource timeout"), message)
    }

    func testTransientFailureWhileStoppingKeepsTheItemForTheNextRun() {
        var l = running()
        let stopping = LifecycleContext(now: t0, stopping: true, jitter: 1)
        XCTAssertEqual(l.handle(end(.curl(code: 56, text: "reset"), partial: true), policy: policy, context: stopping),
                       [.releaseSlot, .saveResumeState()])
        XCTAssertEqual(l.phase, .queued)
        XCTAssertFalse(l.phase.hasEnded)
    }

    func testPermanentFailureFailsAtOnceWithTheSizeHint() {
        var l = running()
        let actions = l.handle(end(.tooLarge(limit: 10), hint: " (expected-bytes × 2)"), policy: policy, context: context)
        guard case .fail(let failed, _)? = actions.last else { return XCTFail("\(actions)") }
        let (code, message) = (failed.code, failed.message)
        XCTAssertEqual(code, "too-large")
        XCTAssertTrue(message.hasSuffix("(expected-bytes × 2)"), message)
        XCTAssertEqual(l.attempts, 1)
    }

    func testSpaceAvailableQueuesAgain() {
        var l = running()
        _ = l.handle(end(.write(errno: ENOSPC), partial: true), policy: policy, context: context)
        XCTAssertEqual(l.handle(.spaceAvailable, policy: policy, context: context), [.schedule])
        XCTAssertEqual(l.phase, .queued)
    }

    private func publishing() -> ItemLifecycle {
        var l = running()
        _ = l.handle(end(nil, sha256: "abc"), policy: policy, context: context)
        XCTAssertEqual(l.phase, .publishing)
        return l
    }

    func testAPacedHostsRefusalQueuesTheItemAgainWithoutAnAttemptOrABackOff() {
        var l = running()
        var refused = TransferEnd(failure: .httpStatus(429), sha256: nil, retryAfter: 30, hasPartial: false)
        refused.pacedRefusal = true
        XCTAssertEqual(l.handle(.transferEnded(refused), policy: policy, context: context),
                       [.retry(at: t0, holdHost: false), .saveResumeState()])
        XCTAssertEqual(l.phase, .retrying)
        XCTAssertEqual(l.attempts, 0)
    }

    func testPublishSucceededEndsThePublishedItem() {
        var l = publishing()
        XCTAssertEqual(l.handle(.publishSucceeded(file: "f", marker: "/d/f.done"), policy: policy, context: context), [.ended])
        XCTAssertEqual(l.phase, .published(file: "f", marker: "/d/f.done"))
        XCTAssertNil(l.state.receipt, "none given: a per-file marker holds the facts")
        var kept = publishing()
        XCTAssertEqual(kept.handle(.publishSucceeded(file: "g", marker: "", receipt: 42), policy: policy, context: context), [.ended])
        XCTAssertEqual(kept.phase, .published(file: "g", marker: ""))
        XCTAssertEqual(kept.state.receipt, 42, "the published phase keeps the receipt the event carried")
    }

    func testPublishFailedWithThePartKeptIsTriedAgainLater() {
        var l = publishing()
        XCTAssertEqual(l.handle(.publishFailed(PublishFault(partGone: false, permanent: false, message: "EIO"), job: nil), policy: policy, context: context),
                       [.retryPublish(at: t0.addingTimeInterval(5))])
        XCTAssertEqual(l.phase, .publishing)
    }

    func testPublishFailedForGoodFails() {
        var gone = publishing()
        XCTAssertEqual(failCode(gone.handle(.publishFailed(PublishFault(partGone: true, permanent: false, message: "x"), job: nil),
                                            policy: policy, context: context)), "publish")
        var permanent = publishing()
        XCTAssertEqual(failCode(permanent.handle(.publishFailed(PublishFault(partGone: false, permanent: true, message: "EXDEV"), job: nil),
                                                 policy: policy, context: context)), "publish")
    }

    func testCancelOfAWaitingItemUnschedulesAndFails() {
        for makeWaiting in [{ (l: inout ItemLifecycle) in _ = l },
                            { (l: inout ItemLifecycle) in _ = l.handle(.operatorCommand(.pause), policy: self.policy, context: self.context) }] {
            var l = lifecycle()
            _ = l.handle(.submitted, policy: policy, context: context)
            makeWaiting(&l)
            let actions = l.handle(.operatorCommand(.cancel), policy: policy, context: context)
            XCTAssertEqual(actions.first, .unschedule)
            XCTAssertEqual(failCode(actions), "cancelled")
        }
        var retrying = running()
        _ = retrying.handle(end(.httpStatus(500)), policy: policy, context: context)
        XCTAssertEqual(retrying.handle(.operatorCommand(.cancel), policy: policy, context: context).first, .unschedule)
        var space = running()
        _ = space.handle(end(.write(errno: ENOSPC)), policy: policy, context: context)
        XCTAssertEqual(space.handle(.operatorCommand(.cancel), policy: policy, context: context).first, .leaveSpaceQueue)
    }

    func testCancelOfARunningItemStopsItsTransfer() {
        var l = running()
        let actions = l.handle(.operatorCommand(.cancel), policy: policy, context: context)
        XCTAssertEqual(Array(actions.prefix(2)), [.stopTransfer(), .releaseSlot])
        XCTAssertEqual(failCode(actions), "cancelled")
    }

    // Cancel while publishing: the job is withdrawn when no batch has it yet; a batch that has
    // it decides (published stays published; a failed batch ends the item cancelled).

    func testCancelWhilePublishingAsksToWithdrawTheJob() {
        var l = publishing()
        XCTAssertEqual(l.handle(.operatorCommand(.cancel), policy: policy, context: context), [.withdrawPublish])
        XCTAssertEqual(l.phase, .publishing)
        XCTAssertEqual(l.handle(.operatorCommand(.pause), policy: policy, context: context), [])
        XCTAssertEqual(l.handle(.operatorCommand(.cancel), policy: policy, context: context), [], "asked once")
    }

    func testWithdrawnJobEndsTheItemCancelled() {
        var l = publishing()
        _ = l.handle(.operatorCommand(.cancel), policy: policy, context: context)
        XCTAssertEqual(failCode(l.handle(.publishWithdrawn, policy: policy, context: context)), "cancelled")
        XCTAssertTrue(l.phase.hasEnded)
    }

    func testWithdrawnWithoutACancelChangesNothing() {
        var l = publishing()
        XCTAssertEqual(l.handle(.publishWithdrawn, policy: policy, context: context), [])
    }

    func testBatchThatHadTheCancelledJobDecides() {
        var published = publishing()
        _ = published.handle(.operatorCommand(.cancel), policy: policy, context: context)
        XCTAssertEqual(published.handle(.publishSucceeded(file: "f", marker: "m"), policy: policy, context: context), [.ended])
        var failed = publishing()
        _ = failed.handle(.operatorCommand(.cancel), policy: policy, context: context)
        let actions = failed.handle(.publishFailed(PublishFault(message: "EIO"), job: nil), policy: policy, context: context)
        XCTAssertEqual(failCode(actions), "cancelled")
    }

    func testSlotForABodyThatCanNeverFitFailsDiskFull() {
        var l = lifecycle()
        _ = l.handle(.submitted, policy: policy, context: context)
        let actions = l.handle(.slotGranted(space: .never(reason: "3000000 bytes can never fit on /f")), policy: policy, context: context)
        XCTAssertEqual(actions.first, .releaseSlot)
        XCTAssertEqual(failCode(actions), "disk-full")
        guard case .failed(let f) = l.phase else { return XCTFail("\(l.phase)") }
        XCTAssertEqual(f.message, "3000000 bytes can never fit on /f")
        XCTAssertEqual(f.attempts, 0)
    }

    func testPublishOnAFullDiskWaitsForSpaceThenPublishesAgain() {
        var l = publishing()
        let actions = l.handle(.publishFailed(PublishFault(diskFull: true, message: "ENOSPC on /final"), job: nil),
                               policy: policy, context: context)
        XCTAssertEqual(actions, [.waitForSpace(reason: "ENOSPC on /final")])
        XCTAssertEqual(l.phase, .waitingToPublish)
        XCTAssertEqual(l.handle(.spaceAvailable, policy: policy, context: context), [.retryPublish(at: t0)])
        XCTAssertEqual(l.phase, .publishing)
    }

    func testPublishOnAFilesystemTooSmallEverFailsDiskFull() {
        var l = publishing()
        let actions = l.handle(.publishFailed(PublishFault(diskFull: true, neverFits: true, message: "too small"), job: nil),
                               policy: policy, context: context)
        XCTAssertEqual(failCode(actions), "disk-full")
    }

    func testCancelAndRetryOfAnItemWaitingToPublish() {
        var cancelled = publishing()
        _ = cancelled.handle(.publishFailed(PublishFault(diskFull: true, message: "x"), job: nil), policy: policy, context: context)
        let actions = cancelled.handle(.operatorCommand(.cancel), policy: policy, context: context)
        XCTAssertEqual(actions.first, .leaveSpaceQueue)
        XCTAssertEqual(failCode(actions), "cancelled")
        var retried = publishing()
        _ = retried.handle(.publishFailed(PublishFault(diskFull: true, message: "x"), job: nil), policy: policy, context: context)
        XCTAssertEqual(retried.handle(.operatorCommand(.retry), policy: policy, context: context),
                       [.leaveSpaceQueue, .retryPublish(at: t0)])
        XCTAssertEqual(retried.phase, .publishing)
    }

    func testPublishFailingEveryTryFailsAfterItsLastTry() {
        var l = publishing()
        for _ in 1 ..< policy.maxPublishTries {
            XCTAssertEqual(l.handle(.publishFailed(PublishFault(message: "EIO"), job: nil), policy: policy, context: context),
                           [.retryPublish(at: t0.addingTimeInterval(policy.publishRetryDelay))])
        }
        XCTAssertEqual(failCode(l.handle(.publishFailed(PublishFault(message: "EIO"), job: nil), policy: policy, context: context)),
                       "publish")
    }

    func testDeadlineEndsAnItemInEveryStateAsCancelDoes() {
        var queued = lifecycle()
        _ = queued.handle(.submitted, policy: policy, context: context)
        let queuedActions = queued.handle(.deadlinePassed, policy: policy, context: context)
        XCTAssertEqual(Array(queuedActions.dropLast()), [.unschedule])
        XCTAssertEqual(failText(queuedActions.last), "deadline: its deadline passed before it ended")
        var run = running()
        let runActions = run.handle(.deadlinePassed, policy: policy, context: context)
        XCTAssertEqual(Array(runActions.dropLast()), [.stopTransfer(), .saveResumeState(), .keepPartialForRetry, .releaseSlot],
                       "a transfer cut by its deadline keeps its partial for a retry")
        XCTAssertEqual(failText(runActions.last), "deadline: its deadline passed before it ended")
        var pub = publishing()
        XCTAssertEqual(pub.handle(.deadlinePassed, policy: policy, context: context), [.withdrawPublish])
        XCTAssertEqual(failCode(pub.handle(.publishWithdrawn, policy: policy, context: context)), "deadline")
    }

    func testFailureRecordCarriesTheFactsTheShellGives() {
        var l = running()
        var c = context
        c.failureFacts = { ItemFailureFacts(index: 3, url: "http://h/x", name: "x", httpStatus: 404) }
        _ = l.handle(end(.httpStatus(404)), policy: policy, context: c)
        guard case .failed(let f) = l.phase else { return XCTFail("\(l.phase)") }
        XCTAssertEqual(f.facts, ItemFailureFacts(index: 3, url: "http://h/x", name: "x", httpStatus: 404))
        XCTAssertEqual(f.code, "http-status")
        XCTAssertEqual(f.attempts, 1)
    }

    func testRecoveredMachineStartsWhereThePlanPutIt() {
        let l = ItemLifecycle(recovered: .published(file: "f", marker: "m"), firstQueued: t0, attempts: 2)
        XCTAssertEqual(l.phase, .published(file: "f", marker: "m"))
        XCTAssertNil(l.state.receipt)
        let kept = ItemLifecycle(recovered: .published(file: "f", marker: "", receipt: 9), firstQueued: t0, attempts: 2)
        XCTAssertEqual(kept.state.receipt, 9, "a recovered published item keeps its receipt in its phase")
        XCTAssertEqual(l.attempts, 2)
        let q = ItemLifecycle(recovered: .queued, firstQueued: t0, attempts: 1)
        XCTAssertEqual(q.phase, .queued)
        XCTAssertEqual(q.attempts, 1)
    }

    func testPauseOfQueuedRetryingWaitingAndRunningItems() {
        var queued = lifecycle()
        _ = queued.handle(.submitted, policy: policy, context: context)
        XCTAssertEqual(queued.handle(.operatorCommand(.pause), policy: policy, context: context), [.unschedule])
        XCTAssertEqual(queued.phase, .paused)

        var retrying = running()
        _ = retrying.handle(end(.httpStatus(500)), policy: policy, context: context)
        XCTAssertEqual(retrying.handle(.operatorCommand(.pause), policy: policy, context: context), [.unschedule])
        XCTAssertEqual(retrying.phase, .paused)

        var space = running()
        _ = space.handle(end(.write(errno: ENOSPC)), policy: policy, context: context)
        XCTAssertEqual(space.handle(.operatorCommand(.pause), policy: policy, context: context), [.leaveSpaceQueue])

        var run = running()
        XCTAssertEqual(run.handle(.operatorCommand(.pause), policy: policy, context: context),
                       [.stopTransfer(), .saveResumeState(), .releaseSlot])
        XCTAssertEqual(run.phase, .paused)
        XCTAssertEqual(run.handle(.operatorCommand(.pause), policy: policy, context: context), [], "paused twice")
    }

    /// A pause is the operator's, not a failure: the attempt it cut is given back, so pausing and
    /// resuming a running item any number of times never uses up `--max-attempts`.
    func testPausingARunningItemGivesItsAttemptBack() {
        var l = running()
        XCTAssertEqual(l.attempts, 1)
        for round in 1...3 {
            XCTAssertEqual(l.handle(.operatorCommand(.pause), policy: policy, context: context),
                           [.stopTransfer(), .saveResumeState(), .releaseSlot])
            XCTAssertEqual(l.attempts, 0, "paused, round \(round)")
            XCTAssertEqual(l.handle(.operatorCommand(.resume), policy: policy, context: context), [.schedule])
            XCTAssertEqual(l.handle(.slotGranted(space: .fits), policy: policy, context: context), [.prepareStart])
            XCTAssertEqual(l.attempts, 1, "running again, round \(round)")
        }
        // A failure after all that still counts as the first attempt: two retries are left.
        _ = l.handle(end(.httpStatus(500)), policy: policy, context: context)
        XCTAssertEqual(l.phase, .retrying)
        XCTAssertEqual(l.attempts, 1)
    }

    func testResumeQueuesAPausedItemOnly() {
        var l = running()
        XCTAssertEqual(l.handle(.operatorCommand(.resume), policy: policy, context: context), [])
        _ = l.handle(.operatorCommand(.pause), policy: policy, context: context)
        XCTAssertEqual(l.handle(.operatorCommand(.resume), policy: policy, context: context), [.schedule])
        XCTAssertEqual(l.phase, .queued)
    }

    func testRetryStartsAWaitingItemNow() {
        var l = running()
        _ = l.handle(end(.httpStatus(500)), policy: policy, context: context)
        XCTAssertEqual(l.handle(.operatorCommand(.retry), policy: policy, context: context), [.unschedule, .schedule])
        XCTAssertEqual(l.phase, .queued)
        var space = running()
        _ = space.handle(end(.write(errno: ENOSPC)), policy: policy, context: context)
        XCTAssertEqual(space.handle(.operatorCommand(.retry), policy: policy, context: context), [.leaveSpaceQueue, .schedule])
        var run = running()
        XCTAssertEqual(run.handle(.operatorCommand(.retry), policy: policy, context: context), [], "running: nothing to retry")
    }

    func testStopOfARunningItemKeepsItsPartial() {
        var l = running()
        XCTAssertEqual(l.handle(.stop, policy: policy, context: context), [.stopTransfer(), .saveResumeState()])
        XCTAssertEqual(l.phase, .queued)
    }

    func testStopDuringPublishingLetsThePublishFinish() {
        var l = publishing()
        XCTAssertEqual(l.handle(.stop, policy: policy, context: context), [])
        XCTAssertEqual(l.handle(.publishSucceeded(file: "f", marker: "m"), policy: policy,
                                context: LifecycleContext(now: t0, stopping: true, jitter: 0)), [.ended])
    }

    func testEndedItemsIgnoreEverything() {
        var l = publishing()
        _ = l.handle(.publishSucceeded(file: "f", marker: "m"), policy: policy, context: context)
        for event: LifecycleEvent in [.submitted, .slotGranted(space: .fits), .operatorCommand(.cancel), .stop,
                                 .operatorCommand(.retry), .spaceAvailable] {
            XCTAssertEqual(l.handle(event, policy: policy, context: context), [], "\(event)")
        }
        XCTAssertEqual(l.phase, .published(file: "f", marker: "m"))
    }

    private func outage(_ failure: TransferFailure) -> LifecycleEvent {
        .transferEnded(TransferEnd(failure: failure, sha256: nil, retryAfter: nil, hasPartial: false, outage: true))
    }

    func testOutageUsesNoAttemptAndHoldsTheHost() {
        var l = running()
        let actions = l.handle(outage(.curl(code: 7, text: "Couldn't connect to server")), policy: policy, context: context)
        XCTAssertEqual(actions, [.hostUnreachable(error: "curl error 7: Couldn't connect to server"), .saveResumeState()])
        XCTAssertEqual(l.phase, .queued)
        XCTAssertEqual(l.attempts, 0, "an outage uses up no attempt")
        // However many outages: never fails for running out of attempts.
        for _ in 0..<20 {
            _ = l.handle(.slotGranted(space: .fits), policy: policy, context: context)
            _ = l.handle(outage(.curl(code: 7, text: "x")), policy: policy, context: context)
        }
        XCTAssertEqual(l.phase, .queued)
        XCTAssertEqual(l.attempts, 0)
    }

    func testOutagePastTheResourceTimeoutFails() {
        var l = running()
        let late = LifecycleContext(now: t0.addingTimeInterval(3601), stopping: false, jitter: 1)
        let actions = l.handle(outage(.curl(code: 7, text: "x")), policy: policy, context: late)
        guard case .fail(let failed, _)? = actions.last else { return XCTFail("\(actions)") }
        let message = failed.message
        XCTAssertTrue(message.contains("resource timeout"), message)
    }

    func testOutageWhileStoppingKeepsTheItemForTheNextRun() {
        var l = running()
        let stopping = LifecycleContext(now: t0, stopping: true, jitter: 1)
        XCTAssertEqual(l.handle(outage(.curl(code: 7, text: "x")), policy: policy, context: stopping),
                       [.releaseSlot, .saveResumeState()])
        XCTAssertFalse(l.phase.hasEnded)
    }

    func testDeadlineCheckEndsOnlyAWaitingItemPastItsResourceTimeout() {
        var l = lifecycle()
        _ = l.handle(.submitted, policy: policy, context: context)
        XCTAssertEqual(l.handle(.deadlineCheck, policy: policy, context: context), [], "within its time: nothing")
        let late = LifecycleContext(now: t0.addingTimeInterval(3600), stopping: false, jitter: 1)
        let actions = l.handle(.deadlineCheck, policy: policy, context: late)
        XCTAssertEqual(actions.first, .unschedule)
        XCTAssertEqual(failCode(actions), "timeout")
        var run = running()
        XCTAssertEqual(run.handle(.deadlineCheck, policy: policy, context: late), [], "a running item is judged by its transfer")
    }

    /// The engine's jitter: spread over 0..<1, not a constant (a back-off without spread would
    /// send every waiting item back to a recovered host at once).
    func testTheEnginesJitterSpreadsOverZeroToOne() {
        var source = JitterSource()
        let draws = (0..<10_000).map { _ in source.next() }
        XCTAssertTrue(draws.allSatisfy { $0 >= 0 && $0 < 1 })
        XCTAssertGreaterThan(Set(draws).count, 9_990)
        let mean = draws.reduce(0, +) / Double(draws.count)
        XCTAssertEqual(mean, 0.5, accuracy: 0.02)
        XCTAssertEqual(draws.filter { $0 < 0.1 }.count, 1_000, accuracy: 150)
        XCTAssertEqual(draws.filter { $0 >= 0.9 }.count, 1_000, accuracy: 150)
    }
}

/// `SourceRotation` and the lifecycle's mirror rows.
final class SourceRotationTests: XCTestCase {
    func testSourcesAreTriedInOrderAndTheRoundStartsAgainOnceAllFailed() {
        var r = SourceRotation(count: 3)
        XCTAssertEqual(r.current, 0)
        XCTAssertTrue(r.hasNext)
        XCTAssertEqual(r.moveOn(), 1)
        XCTAssertEqual(r.moveOn(), 2)
        XCTAssertFalse(r.hasNext, "every source failed in this round")
        XCTAssertNil(r.moveOn())
        XCTAssertEqual(r.current, 0, "back to the first source")
        XCTAssertTrue(r.hasNext)
        XCTAssertFalse(SourceRotation(count: 1).hasNext)
    }

    func testWhichFailuresMoveOn() {
        for f in [TransferFailure.httpStatus(404), .httpStatus(410), .curl(code: 6, text: ""), .curl(code: 60, text: "")] {
            XCTAssertTrue(f.movesToNextSource, "\(f)")
        }
        for f in [TransferFailure.httpStatus(403), .httpStatus(500), .curl(code: 7, text: ""), .curl(code: 28, text: "")] {
            XCTAssertFalse(f.movesToNextSource, "\(f)")
        }
    }

    func testLifecycleMovesOnOnlyWithASourceLeft() {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let policy = RetryPolicy(maxAttempts: 3, resourceTimeout: 3600, backoff: .init(base: 1, cap: 60))
        var context = LifecycleContext(now: t0, stopping: false, jitter: 1)
        func running() -> ItemLifecycle {
            var l = ItemLifecycle(firstQueued: t0)
            _ = l.handle(.submitted, policy: policy, context: context)
            _ = l.handle(.slotGranted(space: .fits), policy: policy, context: context)
            return l
        }
        let gone = LifecycleEvent.transferEnded(TransferEnd(failure: .httpStatus(404), sha256: nil, retryAfter: nil, hasPartial: false))
        var l = running()
        XCTAssertFalse(l.handle(gone, policy: policy, context: context).contains(.nextSource()), "no mirror: fails as before")
        context.nextSource = true
        l = running()
        XCTAssertEqual(l.handle(gone, policy: policy, context: context), [.releaseSlot, .nextSource(), .schedule])
        XCTAssertEqual(l.phase, .queued)
        XCTAssertEqual(l.attempts, 1)
        let down = LifecycleEvent.transferEnded(TransferEnd(failure: .curl(code: 7, text: "refused"), sha256: nil, retryAfter: nil,
                                                       hasPartial: false, outage: true))
        l = running()
        XCTAssertFalse(l.handle(down, policy: policy, context: context).contains(.nextSource()), "a short outage waits")
        context.hostDownLong = true
        l = running()
        XCTAssertEqual(l.handle(down, policy: policy, context: context), [.releaseSlot, .nextSource(), .schedule])
        XCTAssertEqual(l.attempts, 0, "an outage uses no attempt")
        var held = ItemLifecycle(firstQueued: t0)
        _ = held.handle(.submitted, policy: policy, context: context)
        XCTAssertEqual(held.handle(.sourceUnreachable, policy: policy, context: context), [.unschedule, .nextSource(), .schedule])
    }
}
