import Foundation
import SpoolCore
import SpoolRequest
import SpoolTransfer

/// The refresh hook (`--refresh-hook`): a fresh URL for an item whose URL has expired, is about
/// to, or was refused (401, 403, 410). The item keeps its slot and its partial while the hook
/// runs; the new URL is validated as a request's `url`, becomes the item's (kept in `B.state`
/// with its partial, so a restart resumes with it), and the transfer starts again in the same
/// attempt — a partial resumes with `Range` + `If-Range`, so its bytes are kept when the
/// resource is the same. Once per attempt: a second refusal fails the item as any refusal does.
extension Engine {
    func askForFreshURL(_ record: ItemRecord, reason: String) {
        guard hooks.refreshHook != nil else {
            send(.refreshFailed(message: "no refresh hook is configured any more"), to: record)
            return
        }
        record.refreshedInAttempt = record.attempts
        let url = record.currentURL?.string ?? record.url
        logger.info("asking the refresh hook for a new URL", metadata: [
            "item": "\(record.id)", "reason": "\(reason)", "url": "\(urls.shown(url))"])
        hooks.refresh(record, url: url, reason: reason, refreshKey: record.loaded?.refreshKey, attempt: record.attempts)
    }

    /// The refresh hook has ended: its first stdout line is the item's new URL, or the item fails.
    func refreshEnded(key: Int, attempt: Int, outcome: HookRunner.Outcome, line: String?) {
        status.markDirty()
        guard let record = table.item(key) else { return }
        let answer = Self.freshURL(outcome: outcome, line: line)
        if case .success(let url) = answer {
            record.refreshedURL = url
            logger.info("the refresh hook gave a new URL", metadata: ["item": "\(record.id)", "url": "\(urls.shown(url.string))"])
        }
        // Paused, cancelled, stopped or started again meanwhile: the answer is kept, not acted on.
        guard record.phase == .running, record.attempts == attempt else { return }
        switch answer {
        case .success:
            driver.saveResumeState(record, part: record.part)
            send(.urlRefreshed, to: record)
        case .failure(let problem):
            send(.refreshFailed(message: problem.message), to: record)
        }
    }

    struct RefreshProblem: Error { let message: String }

    /// The hook's answer as a URL, validated exactly as a request's `url`; the reason otherwise
    /// (never the line itself: it may be a credential, or anything).
    static func freshURL(outcome: HookRunner.Outcome, line: String?) -> Result<RequestURL, RefreshProblem> {
        switch outcome {
        case .exited(0): break
        case .exited(let status): return .failure(.init(message: "the refresh hook exited with status \(status)"))
        case .signalled(let signal): return .failure(.init(message: "the refresh hook was killed by signal \(signal)"))
        case .timedOut: return .failure(.init(message: "the refresh hook was killed past --hook-timeout"))
        case .couldNotStart(let why): return .failure(.init(message: "the refresh hook could not start: \(why)"))
        }
        guard let line, !line.isEmpty else {
            return .failure(.init(message: "the refresh hook printed no URL (its first output line is the new URL)"))
        }
        do {
            return .success(try RequestURL(validating: line))
        } catch {
            return .failure(.init(message: "the refresh hook's first output line is not a usable URL: \(error.reason)"))
        }
    }
}
