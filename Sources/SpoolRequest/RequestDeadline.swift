import Foundation

/// `deadline:`: by when an item must have ended, else it fails with code `deadline` (so a group
/// marker never waits days for one host that stays down). An RFC 3339 time, or a time counted
/// from the claim (`90m`, `6h`, `2d`, `30s`), which a restart keeps: it counts from when the
/// request file was claimed, not from the restart.
public enum RequestDeadline: Sendable, Hashable, CustomStringConvertible {
    case at(Date)
    case afterClaim(seconds: Double)

    /// Parses `2026-11-23T06:00:00Z` or `NUMBER` followed by `s`, `m`, `h` or `d`; nil otherwise.
    public init?(parsing text: String) {
        if let date = RFC3339.parse(text) {
            self = .at(date)
            return
        }
        guard let unit = text.last, let count = Double(text.dropLast()), count > 0, count.isFinite,
              text.dropLast().allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) else { return nil }
        switch unit {
        case "s": self = .afterClaim(seconds: count)
        case "m": self = .afterClaim(seconds: count * 60)
        case "h": self = .afterClaim(seconds: count * 3600)
        case "d": self = .afterClaim(seconds: count * 86_400)
        default: return nil
        }
    }

    /// The moment it passes, for a request claimed at `claimed`.
    public func date(claimedAt claimed: Date) -> Date {
        switch self {
        case .at(let date): date
        case .afterClaim(let seconds): claimed.addingTimeInterval(seconds)
        }
    }

    public var description: String {
        switch self {
        case .at(let date): RFC3339.format(date)
        case .afterClaim(let seconds): "\(seconds)s after the claim"
        }
    }
}
