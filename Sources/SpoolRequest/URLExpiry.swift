import Foundation

/// When a signed URL stops working, read from the URL itself (or given by the request's
/// `expires:` key). Pure: the README's table "When a URL expires" lists the forms, and
/// `URLExpiryTests` has a row for each.
///
/// | form | query parameters | expiry |
/// |---|---|---|
/// | S3 SigV4 | `X-Amz-Date` (`20261126T210000Z`) and `X-Amz-Expires` (seconds) | date + seconds |
/// | GCS V4 | `X-Goog-Date` and `X-Goog-Expires` | date + seconds |
/// | S3 SigV2, CloudFront, GCS V2 | `Expires` (Unix seconds) with `Signature` | that instant |
/// | nginx `secure_link` | `expires` (Unix seconds) with `md5` | that instant |
/// | Azure SAS | `se` (ISO 8601, UTC: `2026-11-27T10:00:00Z`, `2026-11-27T10:00Z` or `2026-11-27`) with `sig` | that instant |
///
/// Parameter names are matched without regard to case; a URL carrying several forms expires at
/// the earliest. A malformed value is no expiry (the server decides).
public struct URLExpiry: Sendable, Hashable {
    public enum Form: String, Sendable, Hashable {
        case expiresKey = "expires key"
        case s3SigV4 = "X-Amz-Date + X-Amz-Expires"
        case gcsV4 = "X-Goog-Date + X-Goog-Expires"
        case expiresEpoch = "Expires"
        case azureSAS = "se"
        case nginxSecureLink = "md5 + expires"
    }

    public let date: Date
    /// Where the date came from, for messages.
    public let form: Form

    public init(date: Date, form: Form) {
        self.date = date
        self.form = form
    }

    /// The expiry a URL carries in its query, if it has one of the forms above.
    public static func read(from url: String) -> URLExpiry? {
        let parameters = URLQuery.parameters(of: url)
        guard !parameters.isEmpty else { return nil }
        func value(_ name: String) -> String? {
            parameters.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
        var found: [URLExpiry] = []
        for (prefix, form) in [("X-Amz", Form.s3SigV4), ("X-Goog", Form.gcsV4)] {
            if let date = value(prefix + "-Date").flatMap(compactDate), let seconds = value(prefix + "-Expires").flatMap(Int.init),
               seconds >= 0 {
                found.append(URLExpiry(date: date.addingTimeInterval(Double(seconds)), form: form))
            }
        }
        if value("Signature") != nil, let epoch = value("Expires").flatMap(Int64.init), epoch > 0 {
            found.append(URLExpiry(date: Date(timeIntervalSince1970: Double(epoch)), form: .expiresEpoch))
        }
        // nginx's `secure_link $arg_md5,$arg_expires` (the documented setup): the same epoch
        // seconds as `Expires`, beside an `md5` instead of a `Signature`.
        if value("md5") != nil, value("Signature") == nil, let epoch = value("expires").flatMap(Int64.init), epoch > 0 {
            found.append(URLExpiry(date: Date(timeIntervalSince1970: Double(epoch)), form: .nginxSecureLink))
        }
        if value("sig") != nil, let date = value("se").flatMap(azureDate) {
            found.append(URLExpiry(date: date, form: .azureSAS))
        }
        return found.min { $0.date < $1.date }
    }

    /// `YYYYMMDDTHHMMSSZ` (AWS and Google's signing date).
    static func compactDate(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count == 16, b[8] == 0x54, b[15] == 0x5A else { return nil }
        let digits = b[0..<8] + b[9..<15]
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let d = digits.map { Int($0 - 0x30) }
        func n(_ from: Int, _ count: Int) -> Int { d[from..<(from + count)].reduce(0) { $0 * 10 + $1 } }
        let text = String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", n(0, 4), n(4, 2), n(6, 2), n(8, 2), n(10, 2), n(12, 2))
        return RFC3339.parse(text)
    }

    /// Azure's `se`: RFC 3339, or without seconds, or a date alone (its midnight, UTC).
    static func azureDate(_ text: String) -> Date? {
        if let date = RFC3339.parse(text) { return date }
        let b = Array(text.utf8)
        if b.count == 10 { return RFC3339.parse(text + "T00:00:00Z") }
        if b.count == 17, b.last == 0x5A { return RFC3339.parse(String(text.dropLast()) + ":00Z") }
        return nil
    }
}
