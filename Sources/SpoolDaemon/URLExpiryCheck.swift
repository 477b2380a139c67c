import Foundation
import SpoolRequest
import SpoolScheduler

/// Signed URLs that expire while their items wait: checked at intake (a warning when an item
/// may not start before its URL expires) and at the item's turn (the item fails with
/// `url-expired` instead of asking the server with a URL that no longer works).
extension Engine {
    /// At the item's turn, before any request: an expired URL ends the item. Returns whether it did.
    func endIfURLExpired(_ record: ItemRecord, _ item: RequestItem, now: Date) -> Bool {
        guard let expiry = item.expiry, expiry.date <= now else { return false }
        let message = "the URL expired at \(RFC3339.format(expiry.date)) (\(expiry.form.rawValue)) before the item's turn; "
            + "no request was sent"
        send(.urlExpired(message: message), to: record)
        return true
    }

    /// At intake: logs a warning (and keeps a note for `status`) when items of the request wait
    /// past their URL's expiry — an `earliest-start` after it, or a discretionary item whose
    /// window next opens after it.
    func warnOfURLsExpiringBeforeStart(_ index: RequestIndex, request: String, now: Date) {
        let notes = index.expiryNotes
        guard !notes.isEmpty else { return }
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
