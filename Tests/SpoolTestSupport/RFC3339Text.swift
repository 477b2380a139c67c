import Foundation

/// A time as a request file's `earliest-start` takes it (RFC 3339, whole seconds, UTC).
public func rfc3339(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.string(from: date)
}
