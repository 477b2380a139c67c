import Foundation
import SpoolCore
import SpoolRequest
import SpoolScheduler
import SpoolStore
import SpoolTransfer

extension ItemRecord {
    /// What the failure record of this item says beside its code and message: its URL and name
    /// (re-read from the request file if not loaded), the last response's status, curl code and
    /// final URL, and the time it spent unable to reach its host.
    func failureFacts(urls: URLPrivacy, at now: Date) -> ItemFailureFacts {
        var curlCode: Int? = nil, curlText: String? = nil
        if case .curl(let c, let t) = lastFailure { curlCode = c; curlText = t }
        let status = lastFacts?.httpStatus
        let finalURL = lastFacts?.finalURL
        let item = details
        return ItemFailureFacts(index: index, url: urls.shown(item?.url.string ?? ""), name: item?.name ?? "",
                                httpStatus: status == 0 ? nil : status, curlCode: curlCode, curlError: curlText,
                                finalURL: finalURL == item?.url.string ? nil : urls.shown(finalURL),
                                outageSeconds: outageSeconds(at: now))
    }

    /// `on-exists: replace`, and `skip-unchanged` when the resource changed: the new file takes
    /// the final name in place of the old one (never a `-N` name).
    var replacesExisting: Bool { (details?.onExists ?? request.settings.onExists) != .keepBoth }

    /// Ended with the file already published, a 304 having confirmed it (`skip-unchanged`).
    /// Asks the machine's state, not `phase`: that builds a published phase's box to be tested.
    var endedUnchanged: Bool {
        guard case .published = lifecycle.state else { return false }
        return lastFacts?.httpStatus == 304
    }
}

extension SchedulingPriority {
    init(_ p: Priority) {
        switch p { case .low: self = .low; case .normal: self = .normal; case .high: self = .high }
    }
}
