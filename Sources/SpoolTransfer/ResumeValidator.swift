/// Which validator a resume sends in `If-Range`, and whether an answer to it is of the version
/// the kept part holds. Pure rules, used by the daemon when it resumes, records a resumable part
/// and recovers one after a crash.
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

extension ResponseFacts {
    /// This response's own validator when it contradicts `validator`, the `If-Range` a resume
    /// sent; nil when it agrees or the response has none of that kind.
    ///
    /// A server that honours `If-Range` answers a changed resource with 200 and the whole body.
    /// One that ignores it answers 206 (or 416) about the *new* version, and the tail appended
    /// to the kept part would make a file that is neither version. A 206 must carry the
    /// validators a 200 would (RFC 9110 §15.3.7), so the answer tells which version it is of.
    public func validatorContradicting(_ validator: String?) -> String? {
        guard let validator else { return nil }
        // `ResumeValidator.ifRange` sends a strong ETag when there was one, else the date.
        let isETag = validator.hasPrefix("\"") || validator.hasPrefix("W/")
        guard let own = isETag ? etag : lastModified, own != validator else { return nil }
        return own
    }
}
