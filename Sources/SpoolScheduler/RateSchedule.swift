import Foundation

/// `--max-rate` by time of day: `1M 08:00-20:00, 4M 20:00-23:00, 0` — rates with a `DailyWindow`
/// each (local time, may cross midnight), then the rate for the rest of the day. The first window
/// that holds a moment gives its rate. A plain number is a schedule with no windows. Pure: the
/// clock and the time zone are parameters.
public struct RateSchedule: Sendable, Hashable, CustomStringConvertible, Codable {
    public struct Window: Sendable, Hashable {
        /// Bytes per second; 0: no limit.
        public let rate: Int64
        public let window: DailyWindow
    }

    public let windows: [Window]
    /// Bytes per second outside every window; 0: no limit.
    public let defaultRate: Int64

    public init(constant rate: Int64) {
        windows = []
        defaultRate = rate
    }

    public init(windows: [Window], defaultRate: Int64) {
        self.windows = windows
        self.defaultRate = defaultRate
    }

    /// Parses `RATE [HH:MM-HH:MM], …`: every entry but the last names a window, the last none.
    /// `amount` reads one rate (the configuration's byte counts, `512k`, `1M`).
    public init(parsing text: String, amount: (String) -> Int64?) throws(RateScheduleError) {
        let entries = text.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        var windows: [Window] = []
        for (i, entry) in entries.enumerated() {
            let words = entry.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            let last = i == entries.count - 1
            guard let first = words.first else { throw .init("entry \(i + 1) is empty") }
            guard let rate = amount(first) else {
                throw .init("'\(first)' is not a byte count such as 512k or 1M")
            }
            if last {
                guard words.count == 1 else {
                    throw .init("the last entry is the rate outside the windows and has no window, got '\(entry)'")
                }
                self.init(windows: windows, defaultRate: rate)
                return
            }
            guard words.count == 2 else {
                throw .init("each entry but the last is RATE HH:MM-HH:MM, got '\(entry)'")
            }
            guard let window = DailyWindow(parsing: words[1]) else {
                throw .init("'\(words[1])' must look like 08:00-20:00 (HH:MM-HH:MM, start and end differ)")
            }
            windows.append(Window(rate: rate, window: window))
        }
        throw .init("no rate given")
    }

    /// The rate in force at `date`.
    public func rate(at date: Date, in timeZone: TimeZone) -> Int64 {
        windows.first { $0.window.contains(date, in: timeZone) }?.rate ?? defaultRate
    }

    /// The next moment after `date` at which the rate in force changes; nil when it never does.
    public func nextChange(after date: Date, in timeZone: TimeZone) -> Date? {
        guard !windows.isEmpty else { return nil }
        let now = rate(at: date, in: timeZone)
        var moment = date
        // Every window boundary within the next day, in order, until one changes the rate.
        for _ in 0..<(2 * windows.count + 1) {
            guard let next = windows.map({ $0.window.nextTransition(after: moment, in: timeZone) }).min() else { return nil }
            if rate(at: next, in: timeZone) != now { return next }
            moment = next
        }
        return nil
    }

    /// The rate as it was written, in bytes: `1048576 08:00-20:00, 0`; a constant is its number.
    public var description: String {
        (windows.map { "\($0.rate) \($0.window)" } + ["\(defaultRate)"]).joined(separator: ", ")
    }

    public init(from decoder: Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do { try self.init(parsing: text, amount: { Int64($0) }) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// Why a rate schedule could not be read.
public struct RateScheduleError: Error, Sendable, CustomStringConvertible {
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
