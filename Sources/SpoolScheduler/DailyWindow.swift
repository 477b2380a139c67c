import Foundation

/// A daily time-of-day window in local time, `HH:MM-HH:MM`, which may cross midnight
/// (`22:00-06:00`). The discretionary window of the daemon (URLSession's `isDiscretionary`).
public struct DailyWindow: Sendable, Hashable, CustomStringConvertible {
    /// Minutes after local midnight, 0..<1440.
    public let startMinute: Int
    public let endMinute: Int

    /// Parses `HH:MM-HH:MM`; nil when malformed or when start equals end (an empty window).
    public init?(parsing text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let s = Self.minutes(parts[0]), let e = Self.minutes(parts[1]), s != e
        else { return nil }
        startMinute = s
        endMinute = e
    }

    public init?(startMinute: Int, endMinute: Int) {
        guard (0..<1440).contains(startMinute), (0..<1440).contains(endMinute), startMinute != endMinute
        else { return nil }
        self.startMinute = startMinute
        self.endMinute = endMinute
    }

    public var description: String {
        String(format: "%02d:%02d-%02d:%02d", startMinute / 60, startMinute % 60, endMinute / 60, endMinute % 60)
    }

    private static func minutes(_ s: Substring) -> Int? {
        let hm = s.split(separator: ":", omittingEmptySubsequences: false)
        guard hm.count == 2, hm[0].count == 2, hm[1].count == 2,
              let h = Int(hm[0]), let m = Int(hm[1]), (0..<24).contains(h), (0..<60).contains(m) else { return nil }
        return h * 60 + m
    }

    /// Whether `date` falls inside the window, read in `timeZone`.
    public func contains(_ date: Date, in timeZone: TimeZone) -> Bool {
        let minute = Self.minuteOfDay(date, timeZone)
        if startMinute < endMinute { return minute >= startMinute && minute < endMinute }
        return minute >= startMinute || minute < endMinute      // crosses midnight
    }

    /// The next moment after `date` at which the window opens or closes.
    public func nextTransition(after date: Date, in timeZone: TimeZone) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let candidates = [startMinute, endMinute].compactMap { minute -> Date? in
            calendar.nextDate(after: date, matching: DateComponents(hour: minute / 60, minute: minute % 60, second: 0),
                              matchingPolicy: .nextTime)
        }
        return candidates.min() ?? date.addingTimeInterval(60)
    }

    static func minuteOfDay(_ date: Date, _ timeZone: TimeZone) -> Int {
        let local = Int(floor(date.timeIntervalSince1970)) + timeZone.secondsFromGMT(for: date)
        let m = ((local % 86_400) + 86_400) % 86_400
        return m / 60
    }
}
