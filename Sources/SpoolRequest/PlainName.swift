import Foundation

/// The plain-file-name rule shared by `name`, `group` and names derived from URLs: no `/`, not
/// `.` or `..`, no leading `.`, no NUL or control characters, 1–255 UTF-8 bytes, and not ending
/// in a suffix the spool reserves for its own files.
public enum PlainName {
    public static let reservedSuffixes = [".done", ".error", ".part", ".tmp"]

    /// nil when valid, else what is wrong.
    public static func violation(of name: String) -> String? {
        if name.isEmpty { return "is empty" }
        if name.utf8.count > 255 { return "is longer than 255 bytes" }
        if name == "." || name == ".." { return "is '.' or '..'" }
        if name.hasPrefix(".") { return "starts with '.'" }
        if name.contains("/") { return "contains '/'" }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return "contains a control character"
        }
        for suffix in reservedSuffixes where name.lowercased().hasSuffix(suffix) {
            return "ends in '\(suffix)', which the spool reserves for its own files"
        }
        return nil
    }

    /// Makes any candidate valid: `/`, `\`, NUL and control characters become `_`, leading dots
    /// go, a reserved suffix gets a trailing `_`, the result is cut to 255 bytes on a character
    /// boundary, and an empty result becomes `download`.
    public static func sanitise(_ candidate: String) -> String {
        var out = String(String.UnicodeScalarView(candidate.unicodeScalars.map { s in
            (s == "/" || s == "\\" || s.value < 0x20 || s.value == 0x7F) ? "_" : s
        }))
        while out.hasPrefix(".") { out.removeFirst() }
        if reservedSuffixes.contains(where: { out.lowercased().hasSuffix($0) }) { out += "_" }
        while out.utf8.count > 255 { out.removeLast() }
        if reservedSuffixes.contains(where: { out.lowercased().hasSuffix($0) }) { out.removeLast(); out += "_" }
        return out.isEmpty ? "download" : out
    }

    /// The URL path's last non-empty segment, percent-decoded (kept encoded if that is not
    /// UTF-8), sanitised.
    public static func derived(from url: RequestURL) -> String {
        let segment = url.path.split(separator: "/").last.map(String.init) ?? ""
        let decoded = segment.removingPercentEncoding ?? segment
        if decoded == "." || decoded == ".." { return "download" }
        return sanitise(decoded)
    }
}
