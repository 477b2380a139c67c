import Foundation
import SpoolCore
import SpoolRequest
import SpoolScheduler

/// Signed URLs that expire while their items wait: checked at intake (a warning when an item
/// may not start before its URL expires and no refresh hook is configured), at the item's turn
/// (a fresh URL from the refresh hook, or `url-expired` instead of asking the server with a URL
/// that no longer works), and when a server refuses the URL (`URLRefresh.swift`).
extension Engine {
    /// At the item's turn, before any request: a URL that has expired, or expires within
    /// `--refresh-margin`, is refreshed when a hook may still be asked in this attempt; an
    /// expired one otherwise ends the item. Returns whether the transfer must not start now.
    func holdForURLExpiry(_ record: ItemRecord, _ item: RequestItem, now: Date) -> Bool {
        // `expires:` describes the request's URL, not a mirror's or one the refresh hook gave.
        let expiry = record.sourceIndex > 0 || record.refreshedURL != nil
            ? record.currentURL.flatMap { URLExpiry.read(from: $0.string) } : item.expiry
        guard let expiry, expiry.date <= now.addingTimeInterval(configuration.refreshMargin) else { return false }
        if hooks.refreshHook != nil, record.refreshedInAttempt != record.attempts, record.sourceIndex == 0 {
            send(.urlNeedsRefresh(reason: expiry.date <= now ? "expired" : "expiring"), to: record)
            return true
        }
        guard expiry.date <= now else { return false }
        let source = expiry.form.rawValue + (record.sourceIndex > 0 ? " of mirror \(record.sourceIndex)"
            : record.refreshedURL == nil ? "" : " of the refresh hook's URL")
        send(.refusedBeforeRequest(code: "url-expired", message: "the URL expired at \(RFC3339.format(expiry.date)) (\(source)) before the item's turn; "
                         + "no request was sent"), to: record)
        return true
    }

    /// At intake: logs a warning (and keeps a note for `status`) when items of the request wait
    /// past their URL's expiry — an `earliest-start` after it, or a discretionary item whose
    /// window next opens after it.
    func warnOfURLsExpiringBeforeStart(_ index: RequestIndex, request: String, now: Date) {
        let notes = index.expiryNotes
        guard !notes.isEmpty, hooks.refreshHook == nil else { return }
        var late = notes.lateStarts
        var first: (note: ExpiryNote, start: Date)? = notes.firstLateStart.map { ($0, $0.earliestStart ?? now) }
        if let window = scheduler.configuration.window, let note = notes.firstDiscretionary {
            let from = max(now, note.earliestStart ?? now)
            let opens = window.contains(from, in: .current) ? from : window.nextTransition(after: from, in: .current)
            let countedAlready = note.earliestStart.map { $0 > note.expiry.date } ?? false
            if opens > note.expiry.date, !countedAlready {
                late += 1
                if first == nil || note.index < first!.note.index { first = (note, opens) }
            }
        }
        guard let first else { return }
        let text = "\(late) item(s) may start only after their URL expires; first \(request)#\(first.note.index): "
            + "expires \(RFC3339.format(first.note.expiry.date)) (\(first.note.expiry.form.rawValue)), "
            + "starts \(RFC3339.format(first.start)) at the earliest"
        logger.warning("URLs expire before their items may start, and no refresh hook is configured; they will fail with url-expired",
                       metadata: ["request": "\(request)", "items": "\(late)", "item": "\(request)#\(first.note.index)",
                                  "expires": "\(RFC3339.format(first.note.expiry.date))", "starts": "\(RFC3339.format(first.start))"])
        status.noteExpiryWarning(text)
    }
}
