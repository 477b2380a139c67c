import Foundation

/// A daily time-of-day window in local time, `HH:MM-HH:MM` (or `HH:MM:SS-HH:MM:SS`), which may
/// cross midnight (`22:00-06:00`). The discretionary window of the daemon (URLSession's
/// `isDiscretionary`), and each window of a `RateSchedule`.
public struct DailyWindow: Sendable, Hashable, CustomStringConvertible {
    /// Seconds after local midnight, 0..<86400.
    public let startSecond: Int
    public let endSecond: Int

    public var startMinute: Int { startSecond / 60 }
    public var endMinute: Int { endSecond / 60 }

    /// Parses `HH:MM-HH:MM`, seconds optional on either side; nil when malformed or when start
    /// equals end (an empty window).
    public init?(parsing text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let s = Self.seconds(parts[0]), let e = Self.seconds(parts[1]), s != e
        else { return nil }
        startSecond = s
        endSecond = e
    }

    public init?(startMinute: Int, endMinute: Int) {
        self.init(startSecond: startMinute * 60, endSecond: endMinute * 60)
    }

    public init?(startSecond: Int, endSecond: Int) {
        guard (0..<86_400).contains(startSecond), (0..<86_400).contains(endSecond), startSecond != endSecond
        else { return nil }
        self.startSecond = startSecond
        self.endSecond = endSecond
    }

    public var description: String { Self.clock(startSecond) + "-" + Self.clock(endSecond) }

    /// `HH:MM`, or `HH:MM:SS` when the seconds are not zero.
    static func clock(_ second: Int) -> String {
        second % 60 == 0 ? String(format: "%02d:%02d", second / 3600, second / 60 % 60)
            : String(format: "%02d:%02d:%02d", second / 3600, second / 60 % 60, second % 60)
    }

    private static func seconds(_ s: Substring) -> Int? {
        let fields = s.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count == 2 || fields.count == 3, fields.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let h = Int(fields[0]), let m = Int(fields[1]), (0..<24).contains(h), (0..<60).contains(m) else { return nil }
        var sec = 0
        if fields.count == 3 {
            guard let v = Int(fields[2]), (0..<60).contains(v) else { return nil }
            sec = v
        }
        return h * 3600 + m * 60 + sec
    }

    /// Whether `date` falls inside the window, read in `timeZone`.
    public func contains(_ date: Date, in timeZone: TimeZone) -> Bool {
        let second = Self.secondOfDay(date, timeZone)
        if startSecond < endSecond { return second >= startSecond && second < endSecond }
        return second >= startSecond || second < endSecond      // crosses midnight
    }

    /// The next moment after `date` at which the window opens or closes.
    public func nextTransition(after date: Date, in timeZone: TimeZone) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let candidates = [startSecond, endSecond].compactMap { second -> Date? in
            calendar.nextDate(after: date, matching: DateComponents(hour: second / 3600, minute: second / 60 % 60,
                                                                    second: second % 60),
                              matchingPolicy: .nextTime)
        }
        return candidates.min() ?? date.addingTimeInterval(60)
    }

    static func secondOfDay(_ date: Date, _ timeZone: TimeZone) -> Int {
        let local = Int(floor(date.timeIntervalSince1970)) + timeZone.secondsFromGMT(for: date)
        return ((local % 86_400) + 86_400) % 86_400
    }
}
