/// Which validator a resume sends in `If-Range`. A pure rule, here (not in SpoolTransfer) because
/// both the transfer that resumes and the recovery planner (SpoolStore) that decides whether a
/// kept part can be resumed at all go by it; SpoolTransfer adds how an answer is judged against it.
public enum ResumeValidator {
    /// The `If-Range` value for a part whose response carried `etag` and `lastModified`: the ETag
    /// when it is strong, else the Last-Modified date; nil when there is neither, and the part
    /// cannot be resumed safely.
    ///
    /// A weak ETag (`W/"…"`) promises only an equivalent representation, not the same bytes, so
    /// a client must not send one in `If-Range` (RFC 9110 §13.1.5). Some servers (nginx among
    /// them) still compare it as a string and answer 206, which would splice bytes of two
    /// representations.
    public static func ifRange(etag: String?, lastModified: String?) -> String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }
}
