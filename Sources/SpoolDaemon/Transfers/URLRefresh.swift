import Foundation
import SpoolCore
import SpoolRequest
import SpoolTransfer
import Logging

/// The refresh hook (`--refresh-hook`): a fresh URL for an item whose URL has expired, is about
/// to, or was refused (401, 403, 410). The item keeps its slot and its partial while the hook
/// runs; the new URL is validated as a request's `url`, becomes the item's (kept in `B.state`
/// with its partial, so a restart resumes with it), and the transfer starts again in the same
/// attempt — a partial resumes with `Range` + `If-Range`, so its bytes are kept when the
/// resource is the same. Once per attempt: a second refusal fails the item as any refusal does.
extension HookDispatch {
    /// Runs the refresh hook for the item (it keeps its slot and its partial meanwhile); the
    /// event to hand the item instead when no hook is configured any more.
    func askForFreshURL(_ record: ItemRecord, reason: String, logger: Logger, urls: URLPrivacy) -> ItemEvent? {
        guard refreshHook != nil else { return .refreshFailed(message: "no refresh hook is configured any more") }
        record.noteRefreshAsked()
        let url = record.currentURL?.string ?? record.url
        logger.info("asking the refresh hook for a new URL", metadata: [
            "item": "\(record.id)", "reason": "\(reason)", "url": "\(urls.shown(url))"])
        refresh(record, url: url, reason: reason, refreshKey: record.loaded?.refreshKey, attempt: record.attempts)
        return nil
    }
}

/// The refresh hook's answer read and carried out. Held by `TransferDriver`; the item's refresh
/// (asked, the URL it gave) is its record's, so this keeps no state of its own.
struct URLRefresh {
    let states: ResumeStates
    let urls: URLPrivacy
    let logger: Logger

    struct RefreshProblem: Error { let message: String }

    /// The refresh hook has ended: its first stdout line is the item's new URL (kept, with its
    /// partial's resume state), or the item fails. Returns the item's event; none when it was
    /// paused, cancelled, stopped or started again meanwhile (the answer is kept, not acted on).
    func ended(_ record: ItemRecord, attempt: Int, outcome: HookRunner.Outcome, line: String?) -> ItemEvent? {
        let answer = Self.freshURL(outcome: outcome, line: line)
        if case .success(let url) = answer {
            record.noteRefreshedURL(url)
            logger.info("the refresh hook gave a new URL", metadata: ["item": "\(record.id)", "url": "\(urls.shown(url.string))"])
        }
        guard record.phase == .running, record.attempts == attempt else { return nil }
        switch answer {
        case .success:
            states.saveResumeState(record, part: record.part)
            return .urlRefreshed
        case .failure(let problem):
            return .refreshFailed(message: problem.message)
        }
    }

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
