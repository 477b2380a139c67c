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
        // A path first: `../x` is refused as what it is, not for its leading dot.
        if name.contains("/") {
            return "is a path ('\(name)'), not a plain file name: a name is one file in the final folder, without '/'"
        }
        if name == "." || name == ".." { return "is '.' or '..'" }
        if name.hasPrefix(".") { return "starts with '.'" }
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
        if isPlainASCII(candidate.utf8) { return candidate }
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
        let segment = lastSegment(of: url.path)
        // Most URLs end in a name that needs neither decoding nor sanitising: skip Foundation's
        // percent decoding (a tenth of a small file's CPU on the engine thread, where every
        // starting item derives its name again).
        if !segment.utf8.contains(0x25), isPlainASCII(segment.utf8) { return segment }
        let decoded = segment.removingPercentEncoding ?? segment
        if decoded == "." || decoded == ".." { return "download" }
        return sanitise(decoded)
    }

    /// The last non-empty `/`-separated segment of `path` ("" when none), found by its bytes. Why
    /// not `split(separator: "/")`: splitting by characters cost 8,000 instructions a URL, and
    /// every item's name is derived at intake and again at its start. A request's URL is ASCII
    /// (`RequestURL`), so a byte `/` is a character `/`.
    static func lastSegment(of path: String) -> String {
        let utf8 = path.utf8
        var end = utf8.endIndex
        while end > utf8.startIndex, utf8[utf8.index(before: end)] == 0x2F { end = utf8.index(before: end) }
        var start = end
        while start > utf8.startIndex, utf8[utf8.index(before: start)] != 0x2F { start = utf8.index(before: start) }
        return String(path[start..<end])
    }

    /// Whether `name` is printable ASCII that already satisfies the rule, so `sanitise` would
    /// return it unchanged: 1–255 bytes, no `/`, backslash, control character or leading `.`, and no
    /// reserved suffix in any case.
    static func isPlainASCII(_ name: String.UTF8View) -> Bool {
        guard let first = name.first, first != 0x2E, name.count <= 255 else { return false }
        for byte in name where byte < 0x20 || byte >= 0x7F || byte == 0x2F || byte == 0x5C { return false }
        return !reservedSuffixes.contains { suffix in
            let tail = name.suffix(suffix.utf8.count)
            return tail.count == suffix.utf8.count
                && zip(tail, suffix.utf8).allSatisfy { a, b in (a | 0x20) == b || a == b }
        }
    }
}
