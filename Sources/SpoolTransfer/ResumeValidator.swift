import SpoolRequest

/// Whether an answer to a resume is of the version the kept part holds (the `If-Range` rule
/// itself, `ResumeValidator`, is in SpoolRequest: the recovery planner goes by it too).
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
