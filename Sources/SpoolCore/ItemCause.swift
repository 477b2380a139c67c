import Foundation
import SpoolRequest
import SpoolScheduler

/// Why an item that a deadline or a cancel ended had not ended by itself: what it was waiting on,
/// or what it last failed with. A `deadline` ending alone says only that time ran out; a down
/// host and a 500 after six attempts read the same. The cause tells them apart, in the error
/// file, the group marker, `events` and the hooks, from what the item's machine and its rooms knew
/// at that moment (nothing is looked up afterwards).
///
/// `code`, in order of precedence:
///
/// | the item | code | message |
/// |---|---|---|
/// | its host unreachable (an outage) | `host-unreachable` | the host, since when, next probe, last error |
/// | a transfer of it failed before | that failure's code (`http-status`, `connect`, …) | the failure, attempts, what it waited on |
/// | otherwise | its status state (`pending`, `waiting-space`, `paused`, `running`, …) | what it waited on |
public struct ItemCause: Sendable, Hashable {
    public var code: String
    public var message: String
    /// `host:port` of the source it was scheduled for.
    public var host: String?
    public var httpStatus: Int?
    public var curlCode: Int?
    /// Attempts it had used (an outage, a pause or a full disk uses none).
    public var attempts: Int
    /// The status state it was in when it ended (`pending`, `retrying`, `waiting-space`,
    /// `waiting-window`, `waiting-start`, `paused`, `running`, `publishing`).
    public var waitingFor: String?

    public init(code: String, message: String, host: String? = nil, httpStatus: Int? = nil, curlCode: Int? = nil,
                attempts: Int, waitingFor: String? = nil) {
        self.code = code; self.message = message; self.host = host; self.httpStatus = httpStatus
        self.curlCode = curlCode; self.attempts = attempts; self.waitingFor = waitingFor
    }

    /// The endings that carry a cause: the others are their own cause.
    public static func applies(to code: String) -> Bool { code == "deadline" || code == "cancelled" }
}

/// What the shell knows of an item besides its machine, for its cause: what its status would show
/// (host, host wait, window, space) and its last transfer failure. Read only when an item ends by
/// deadline or cancel.
public struct ItemCauseFacts: Sendable, Hashable {
    public var status: ItemStatusFacts
    /// The last failed transfer's reason code and text (`http-status`, "HTTP status 500"), if any.
    public var lastFailureCode: String?
    public var lastFailure: String?

    public init(status: ItemStatusFacts, lastFailureCode: String? = nil, lastFailure: String? = nil) {
        self.status = status; self.lastFailureCode = lastFailureCode; self.lastFailure = lastFailure
    }
}

extension ItemMachine {
    /// The cause of an ending by deadline or cancel, decided from the phase the item leaves (so
    /// called before `fail` changes it), its attempts, and the shell's facts (nil in a simulation
    /// that gives none: the phase alone then).
    func cause(facts: ItemFailureFacts, shell: ItemCauseFacts?) -> ItemCause {
        let status = shell.map { self.status($0.status) }
        let state = status?.state ?? phase.label
        let host = shell?.status.hostKey
        let startsAt = status?.startsAt.map { state == "retrying" ? "; next try at \(RFC3339.format($0))" : " (\(RFC3339.format($0)))" } ?? ""
        var cause = ItemCause(code: state, message: (status?.waitingFor ?? Self.waitedFor(state)) + startsAt,
                              host: host, httpStatus: facts.httpStatus, curlCode: facts.curlCode,
                              attempts: attempts, waitingFor: state)
        if case .unreachable(let outage)? = shell?.status.hostWait {
            cause.code = "host-unreachable"
            cause.message = ItemStatus.describe(.unreachable(outage), host: outage.hostKey) + "; last error: \(outage.lastError)"
            // An item queued behind the host's probe never ran: the host's last error is its cause.
            if cause.curlCode == nil { cause.curlCode = Self.curlCode(in: outage.lastError) }
        } else if let code = shell?.lastFailureCode, let text = shell?.lastFailure {
            cause.code = code
            let waited = status?.waitingFor.map { "; waiting for \($0)" } ?? ""
            cause.message = "\(text) (\(attempts) attempt\(attempts == 1 ? "" : "s"); it was \(state)\(waited)\(startsAt))"
        }
        return cause
    }

    /// The code in a host's last error as the shell words a libcurl failure ("curl error 7: …").
    static func curlCode(in text: String) -> Int? {
        guard text.hasPrefix("curl error ") else { return nil }
        return Int(text.dropFirst("curl error ".count).prefix { $0.isNumber })
    }

    /// A state's words when the shell gave no status facts.
    static func waitedFor(_ state: String) -> String {
        switch state {
        case "running": "it was transferring"
        case "publishing": "it was being published"
        case "paused": ItemStatus.pausedWaitsFor
        case "waiting-start": "it waited for its earliest start"
        case "retrying": "it waited to try again"
        case "pending": "it waited for a connection"
        default: "it was \(state)"
        }
    }
}
