import Foundation

/// How an upload item's body is sent (`method:`).
public enum UploadMethod: String, Sendable, Hashable, CaseIterable {
    case put = "PUT", post = "POST"
}

/// What an upload item sends: `SPOOL/outgoing/NAME`, with its method and media type.
public struct Upload: Sendable, Hashable {
    /// A plain name in `outgoing/` (`UploadName.violation` holds for it).
    public let name: String
    public let method: UploadMethod
    /// `content-type:`, else `application/octet-stream`.
    public let contentType: String

    public static let defaultContentType = "application/octet-stream"

    public init(name: String, method: UploadMethod = .put, contentType: String = Upload.defaultContentType) {
        self.name = name
        self.method = method
        self.contentType = contentType
    }
}

/// The rule for `upload:`: a file directly inside `outgoing/`, named so that nothing else can
/// be reached through it. Each way out gets its own reason, so a producer sees which rule it
/// broke.
public enum UploadName {
    /// The suffixes of an upload's record files beside it in the final folder.
    public static let recordSuffixes = [".uploaded", ".response"]

    /// nil when `name` is a file name directly in `outgoing/`, else why not.
    public static func violation(of name: String) -> String? {
        if name.hasPrefix("/") { return "is an absolute path; name a file inside outgoing/" }
        if name.split(separator: "/", omittingEmptySubsequences: false).contains("..") {
            return "contains '..'; name a file inside outgoing/"
        }
        if name.contains("/") { return "contains '/'; name a file directly inside outgoing/" }
        if let why = PlainName.violation(of: name) { return why }
        for suffix in recordSuffixes where name.lowercased().hasSuffix(suffix) {
            return "ends in '\(suffix)', which the spool reserves for upload records"
        }
        return nil
    }
}

/// `content-type:` values: `type/subtype` with optional `; parameter=value`, printable ASCII.
enum MediaType {
    static func isValid(_ value: String) -> Bool {
        guard !value.isEmpty, value.utf8.count <= 256,
              value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return false }
        let essence = value.split(separator: ";", maxSplits: 1)[0].trimmingSpaces()
        let parts = essence.split(separator: "/", omittingEmptySubsequences: false)
        let token = Set("!#$%&'*+-.^_`|~".utf8)
        func isToken(_ s: Substring) -> Bool {
            !s.isEmpty && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || token.contains($0) }
        }
        return parts.count == 2 && isToken(parts[0]) && isToken(parts[1])
    }
}
