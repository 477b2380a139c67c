import Foundation
import SpoolCore
import SpoolTransfer

extension Engine {
    /// An item's failure facts (see `ItemRecord.failureFacts`) with what its cause is decided
    /// from, should a deadline or a cancel end it: what its status would show now (its host's
    /// outage or back-off, the window, its earliest start) and its last transfer failure. Read
    /// only when an event fails the item.
    func failureFacts(of record: ItemRecord, urls: URLPrivacy, at now: Date) -> ItemFailureFacts {
        var facts = record.failureFacts(urls: urls, at: now)
        facts.cause = causeFacts(of: record, at: now)
        return facts
    }

    /// What an item's cause is decided from, without its URL (a whole request's cancel ends
    /// never-started items without reading the request file; the group end reads the URLs).
    func causeFacts(of record: ItemRecord, at now: Date) -> ItemCauseFacts {
        let status = ItemStatusFacts(now: now, earliestStart: record.earliestStart, discretionary: record.discretionary,
                                     window: hosts.window, timeZone: .current,
                                     hostKey: record.hostKey, hostWait: hosts.hostWait(record.hostKey, now: now))
        return ItemCauseFacts(status: status, lastFailureCode: record.lastFailure?.code,
                              lastFailure: record.lastFailure.map { "\($0)" })
    }
}
