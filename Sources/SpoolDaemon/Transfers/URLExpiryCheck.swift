import Foundation
import SpoolCore
import SpoolRequest
import SpoolScheduler
import Logging
import SpoolConfiguration

/// Signed URLs that expire while their items wait: checked at intake (a warning when an item
/// may not start before its URL expires and no refresh hook is configured), read at the item's
/// turn for its machine to decide (a fresh URL from the refresh hook, or `url-expired` instead
/// of asking the server with a URL that no longer works), and when a server refuses the URL
/// (`URLRefresh.swift`).
///
/// `StartChecks` reads what an attempt's start depends on; a value `TransferDriver` makes when
/// asked, from the configuration in force (`credentials-dir` takes a reload), with no state.
struct StartChecks {
    let configuration: DaemonConfiguration
    let logger: Logger

    /// What an attempt's start depends on, read at the item's turn (the item's machine decides):
    /// the item's full description (from the request file), when the URL it would ask expires
    /// (`expires:` describes the request's URL, not a mirror's or one the refresh hook gave), and
    /// its credentials' header lines — read at each start, so a rotated secret is used at once,
    /// and never kept.
    func check(_ record: ItemRecord, requestFile: RequestFileSlot) -> StartCheck {
        let item: RequestItem
        do { item = try record.load(keepingOpenIn: requestFile) } catch {
            if StartProblem(errno: error.errno) == .shortOfResources {
                logger.warning("could not open the item's files (out of descriptors or memory); it waits and tries again",
                               metadata: ["item": "\(record.id)", "error": "\(error)"])
            }
            return StartCheck(loadProblem: StartProblem(errno: error.errno), loadMessage: "\(error)")
        }
        var check = StartCheck()
        let expiry = record.sourceIndex > 0 || record.refreshedURL != nil
            ? record.currentURL.flatMap { URLExpiry.read(from: $0.string) } : item.expiry
        if let expiry {
            check.expiresAt = expiry.date
            check.expirySource = expiry.form.rawValue + (record.sourceIndex > 0 ? " of mirror \(record.sourceIndex)"
                : record.refreshedURL == nil ? "" : " of the refresh hook's URL")
        }
        if let name = item.credentials {
            do throws(PrivateFile.Refused) {
                check.credentials = try PrivateFile.credentialHeaders(directory: configuration.credentialsDir, name: name)
            } catch {
                check.credentialsRefused = error.description
            }
        }
        return check
    }
}

/// At intake, with no refresh hook configured: items of the request that wait past their URL's
/// expiry — an `earliest-start` after it, or a discretionary item whose window next opens after
/// it. Logged as a warning, and kept as a note for `status`.
struct ExpiryWarning {
    /// The note for `status`.
    let text: String

    init?(_ index: RequestIndex, request: String, window: DailyWindow?, now: Date, logger: Logger) {
        let notes = index.expiryNotes
        guard !notes.isEmpty else { return nil }
        var late = notes.lateStarts
        var first: (note: ExpiryNote, start: Date)? = notes.firstLateStart.map { ($0, $0.earliestStart ?? now) }
        if let window, let note = notes.firstDiscretionary {
            let from = max(now, note.earliestStart ?? now)
            let opens = window.contains(from, in: .current) ? from : window.nextTransition(after: from, in: .current)
            let countedAlready = note.earliestStart.map { $0 > note.expiry.date } ?? false
            if opens > note.expiry.date, !countedAlready {
                late += 1
                if first == nil || note.index < first!.note.index { first = (note, opens) }
            }
        }
        guard let first else { return nil }
        text = "\(late) item(s) may start only after their URL expires; first \(request)#\(first.note.index): "
            + "expires \(RFC3339.format(first.note.expiry.date)) (\(first.note.expiry.form.rawValue)), "
            + "starts \(RFC3339.format(first.start)) at the earliest"
        logger.warning("URLs expire before their items may start, and no refresh hook is configured; they will fail with url-expired",
                       metadata: ["request": "\(request)", "items": "\(late)", "item": "\(request)#\(first.note.index)",
                                  "expires": "\(RFC3339.format(first.note.expiry.date))", "starts": "\(RFC3339.format(first.start))"])
    }
}
