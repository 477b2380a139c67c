import Foundation

/// Parses the IMF-fixdate form of HTTP dates (`Sun, 06 Nov 1994 08:49:37 GMT`) used by Retry-After.
enum HTTPDate {
    static func parse(_ text: String) -> Date? {
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let parts = text.split(separator: " ")
        guard parts.count == 6, let day = Int(parts[1]), let month = months.firstIndex(of: String(parts[2])),
              let year = Int(parts[3]) else { return nil }
        let hms = parts[4].split(separator: ":").compactMap { Int($0) }
        guard hms.count == 3 else { return nil }
        var components = DateComponents()
        components.year = year; components.month = month + 1; components.day = day
        components.hour = hms[0]; components.minute = hms[1]; components.second = hms[2]
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: components)
    }
}
