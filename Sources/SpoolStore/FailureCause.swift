import Foundation

/// Why an item ended by `deadline` or `cancelled` had not ended by itself: the `cause` object of
/// its line in `R.error`, in the group marker and in `events`. The daemon's core decides it (see
/// `ItemCause` in SpoolCore); this is its record, which clients read without the engine.
public struct FailureCause: Codable, Sendable, Hashable {
    /// `host-unreachable`, the last failure's code (`http-status`, `connect`, …), or the status
    /// state the item was in (`pending`, `waiting-space`, `paused`, `running`, …).
    public var code: String
    public var message: String
    /// `host:port` of the source it was scheduled for.
    public var host: String?
    public var httpStatus: Int?
    public var curlCode: Int?
    public var attempts: Int
    /// The status state it was in when it ended.
    public var waitingFor: String?

    public init(code: String, message: String, host: String? = nil, httpStatus: Int? = nil, curlCode: Int? = nil,
                attempts: Int, waitingFor: String? = nil) {
        self.code = code; self.message = message; self.host = host; self.httpStatus = httpStatus
        self.curlCode = curlCode; self.attempts = attempts; self.waitingFor = waitingFor
    }
}

extension FailureCause: SpoolRecord {
    /// Written by hand as JSONEncoder with sorted keys would, inside an item's line.
    public func jsonBytes() -> [UInt8] {
        var w = JSONObjectWriter(capacity: 192)
        w.int("attempts", Int64(attempts))
        w.string("code", code)
        w.int("curlCode", curlCode.map(Int64.init))
        w.string("host", host)
        w.int("httpStatus", httpStatus.map(Int64.init))
        w.string("message", message)
        w.string("waitingFor", waitingFor)
        return w.close()
    }
}
