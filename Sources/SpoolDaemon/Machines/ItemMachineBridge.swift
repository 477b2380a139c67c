import Foundation
import SpoolConfiguration
import SpoolCore
import SpoolScheduler
import SpoolStore
import SpoolTransfer

// The shell's side of the core's item machine: the machine holds the shell's running attempt
// (`RunningAttempt`: the open part and what the attempt learns), publish job and published
// file's receipt (`PublishedReceipt`; it never looks into them), and takes its facts in the
// core's own plain types, which these conversions make from what the adapters report.

/// An item's machine over the shell's running attempt, publish job and published file's receipt.
typealias ItemLifecycle = ItemMachine<RunningAttempt, PublishJob, PublishedReceipt>
typealias ItemEvent = SpoolCore.ItemEvent<RunningAttempt, PublishJob, PublishedReceipt>

/// The facts of a published file (its marker's content, `name` the final name), kept by the
/// item's published phase (the machine's `Receipt`) for what reads them after it ended: a
/// `markers: group` marker lists them (there is no per-file marker to hold them), the item hook
/// takes its `SPOOLFETCH_SHA256` from them, and for an item a 304 ended they are the existing
/// file's. nil in the phase when a per-file marker holds them (a large batch keeps none). A class:
/// the phase's box grows by one pointer, not by a marker's some 300 bytes, for every published
/// item.
final class PublishedReceipt: Sendable {
    let marker: ItemMarker
    init(_ marker: ItemMarker) { self.marker = marker }
}
typealias ItemAction = ItemEffect<RunningAttempt, PublishJob>
typealias LifecycleContext = ItemContext

extension TransferFault {
    /// The facts of a transfer layer's failure that the machine decides on. `serverError`: the
    /// reason an error response's body gave (`ResponseFacts.serverError`), added to the text.
    init(_ failure: TransferFailure, serverError: String? = nil) {
        var status: Int? = nil
        var diskFull = false
        var tooLarge = false
        switch failure {
        case .httpStatus(let s): status = s
        case .write(let e): diskFull = e == ENOSPC || e == EDQUOT
        case .noRoom: diskFull = true
        case .tooLarge: tooLarge = true
        default: break
        }
        self.init(code: failure.code, description: "\(failure)" + (serverError.map { " (\($0))" } ?? ""), httpStatus: status, isTransient: failure.isTransient,
                  discardsPartial: failure.discardsPartial, movesToNextSource: failure.movesToNextSource,
                  diskFull: diskFull, cancelled: failure == .cancelled, tooLarge: tooLarge)
    }
}

extension TransferEnd {
    /// How a transfer ended, from the transfer layer's failure (nil: the body is complete).
    init(failure: TransferFailure?, sha256: String?, retryAfter: Double?, hasPartial: Bool,
         wholePartialSHA256: String? = nil, wantedSHA256: String? = nil, tooLargeHint: String? = nil,
         outage: Bool = false, notModified: UnchangedFile? = nil, serverError: String? = nil) {
        self.init(fault: failure.map { TransferFault($0, serverError: serverError) }, sha256: sha256, retryAfter: retryAfter, hasPartial: hasPartial,
                  wholePartialSHA256: wholePartialSHA256, wantedSHA256: wantedSHA256, tooLargeHint: tooLargeHint,
                  outage: outage, notModified: notModified)
    }
}

extension ItemFailure {
    /// The error file's and state file's record of a failed item: one encoding of `ItemFailed`.
    init(_ failed: ItemFailed) {
        let f = failed.facts
        self.init(index: f.index, url: f.url, name: f.name, code: failed.code, message: failed.message,
                  attempts: failed.attempts, httpStatus: f.httpStatus, curlCode: f.curlCode, curlError: f.curlError,
                  finalURL: f.finalURL, outageSeconds: f.outageSeconds)
        cause = failed.cause.map(FailureCause.init)
    }
}

extension ItemFailed {
    /// A failure read back from a state file (an adopted item that had failed).
    init(_ record: ItemFailure) {
        self.init(code: record.code, message: record.message, attempts: record.attempts,
                  facts: ItemFailureFacts(index: record.index, url: record.url, name: record.name,
                                          httpStatus: record.httpStatus, curlCode: record.curlCode,
                                          curlError: record.curlError, finalURL: record.finalURL,
                                          outageSeconds: record.outageSeconds))
        cause = record.cause.map(ItemCause.init)
    }
}

extension OperatorVerb {
    init(_ verb: ControlCommand.Verb) {
        switch verb {
        case .cancel: self = .cancel
        case .pause: self = .pause
        case .resume: self = .resume
        case .retry: self = .retry
        // `ControlHandler` answers a probe itself: it names a host, and no item is told.
        case .probe: preconditionFailure("probe is a host's verb, never an item's")
        }
    }
}

// What the configuration says for the core's and the scheduler's decisions: one mapping each,
// for the start and for every reload.

extension RetryPolicy {
    init(_ c: DaemonConfiguration) {
        self.init(maxAttempts: c.maxAttempts, resourceTimeout: c.resourceTimeout,
                  backoff: Backoff(base: c.retryBase, cap: c.retryCap))
        refreshMargin = c.refreshMargin
    }
}

extension SchedulerConfiguration {
    init(_ c: DaemonConfiguration) {
        self.init(concurrency: c.concurrency, perHost: c.perHost, maxStreams: c.maxStreams,
                  window: c.window.flatMap(DailyWindow.init(parsing:)), perHostMax: c.perHostMax)
    }
}
