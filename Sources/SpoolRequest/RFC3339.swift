import Foundation

/// RFC 3339 timestamps (`2026-11-23T02:00:00Z`, `…+01:00`, fractional seconds). Hand-written
/// rather than a DateFormatter: it is pure, fast, and rejects out-of-range fields.
public enum RFC3339 {
    public static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count >= 20 else { return nil }
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var v = 0
            for i in from..<(from + count) {
                guard (0x30...0x39).contains(b[i]) else { return nil }
                v = v * 10 + Int(b[i] - 0x30)
            }
            return v
        }
        guard let year = num(0, 4), b[4] == 0x2D, let month = num(5, 2), b[7] == 0x2D, let day = num(8, 2),
              [0x54, 0x74, 0x20].contains(b[10]), let hour = num(11, 2), b[13] == 0x3A, let minute = num(14, 2),
              b[16] == 0x3A, let second = num(17, 2) else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month, year), hour < 24, minute < 60, second <= 60
        else { return nil }
        var i = 19
        var fraction = 0.0
        if i < b.count, b[i] == 0x2E {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, (0x30...0x39).contains(b[i]) {
                fraction += Double(b[i] - 0x30) * scale
                scale /= 10
                i += 1
            }
            if i == start { return nil }
        }
        guard i < b.count else { return nil }
        var offset = 0
        if b[i] == 0x5A || b[i] == 0x7A {
            i += 1
        } else if b[i] == 0x2B || b[i] == 0x2D {
            guard let oh = num(i + 1, 2), b.count > i + 3, b[i + 3] == 0x3A, let om = num(i + 4, 2), oh < 24, om < 60
            else { return nil }
            offset = (oh * 3600 + om * 60) * (b[i] == 0x2D ? -1 : 1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year, month, day)
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offset) + fraction
        return Date(timeIntervalSince1970: seconds + (second == 60 ? 1 : 0))
    }

    /// UTC, `2026-11-23T02:00:00Z`; milliseconds only when non-zero. Written into one byte
    /// buffer: every published item formats two of these on the engine thread.
    public static func format(_ date: Date) -> String {
        let t = date.timeIntervalSince1970
        let whole = Int(t.rounded(.down))
        let millis = Int(((t - Double(whole)) * 1000).rounded(.down))
        var days = whole / 86_400
        var rem = whole % 86_400
        if rem < 0 { rem += 86_400; days -= 1 }
        let (y, m, d) = civilFromDays(days)
        var out: [UInt8] = []
        out.reserveCapacity(24)
        func put(_ v: Int, _ width: Int) {
            if v < 0 { out.append(0x2D) }
            let digits = Array(String(abs(v)).utf8)
            if digits.count < width { out.append(contentsOf: repeatElement(0x30, count: width - digits.count)) }
            out.append(contentsOf: digits)
        }
        func two(_ v: Int) { out.append(0x30 + UInt8(v / 10)); out.append(0x30 + UInt8(v % 10)) }
        if (0...9999).contains(y) {
            out.append(contentsOf: [0x30 + UInt8(y / 1000), 0x30 + UInt8(y / 100 % 10), 0x30 + UInt8(y / 10 % 10), 0x30 + UInt8(y % 10)])
        } else {
            put(y, 4)
        }
        out.append(0x2D); two(m); out.append(0x2D); two(d); out.append(0x54)
        two(rem / 3600); out.append(0x3A); two(rem % 3600 / 60); out.append(0x3A); two(rem % 60)
        if millis > 0 {
            out.append(0x2E)
            out.append(contentsOf: [0x30 + UInt8(millis / 100), 0x30 + UInt8(millis / 10 % 10), 0x30 + UInt8(millis % 10)])
        }
        out.append(0x5A)
        return String(decoding: out, as: UTF8.self)
    }

    static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 (Howard Hinnant's algorithm).
    static func daysFromCivil(_ y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}

/// Byte counts with an optional binary suffix: `1500`, `64k`, `10M`, `2GiB`, `1T`.
public enum ByteCount {
    public static func parse(_ text: String) -> Int64? {
        var digits = Substring(text)
        var multiplier: Int64 = 1
        let suffixes: [(String, Int64)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
                                            ("k", 1 << 10), ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)]
        for (suffix, m) in suffixes where digits.hasSuffix(suffix) {
            digits = digits.dropLast(suffix.count)
            multiplier = m
            break
        }
        guard !digits.isEmpty, digits.count <= 19, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              let value = Int64(digits) else { return nil }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : product
    }

    /// A byte count as the README and `--help` write it: with the largest suffix (`k`, `M`, `G`,
    /// `T`) that divides it exactly, `256M` rather than `268435456`; `parse` reads it back.
    public static func format(_ value: Int64) -> String {
        guard value != 0 else { return "0" }
        for (suffix, shift) in [("T", 40), ("G", 30), ("M", 20), ("k", 10)] where value % (Int64(1) << shift) == 0 {
            return "\(value >> shift)\(suffix)"
        }
        return "\(value)"
    }
}
