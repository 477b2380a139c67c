/// What the engine and status read of segmented transfers (see `SegmentSet`).
extension TransferSession {
    /// A segmented item's prefix and ranges as far as they are in the file (for `B.state`).
    public func segmentExtents(of key: Int) -> (prefix: Int64, ranges: [[Int64]])? {
        segmentSets[key]?.extents
    }

    /// Connections `key`'s transfer uses now, when it is segmented (for status).
    public func connections(of key: Int) -> Int? {
        guard let set = segmentSets[key], set.connections > 1 else { return nil }
        return set.connections
    }

    /// Segmented items (for the engine's per-host accounting and `setStealing`).
    public var segmentedKeys: [Int] { Array(segmentSets.keys) }

    /// Whether any body is fetched in segments now (no array made: the loop asks every wake-up).
    public var hasSegments: Bool { !segmentSets.isEmpty }

    /// Whether the segments' owner has anything to tend: a body in segments or one that may be
    /// split, or a segment count not yet taken. False for every turn of small bodies, so the
    /// loop skips `Hosts.tendSegments` (and the three lists it would make) on those wake-ups
    /// unless a host's adaptive connection limit changed.
    public var hasSegmentWork: Bool { !segmentSets.isEmpty || !splittable.isEmpty || !segmentConnectionChanges.isEmpty }

    /// Whether `key`'s finished ranges may take over half of a remaining one; false leaves the
    /// connection free for the host's other items.
    public func setStealing(_ key: Int, _ allowed: Bool) { segmentSets[key]?.stealing = allowed }

    /// Items whose count of segment connections changed since the last call, with the count.
    public func takeSegmentConnectionChanges() -> [(key: Int, segments: Int)] {
        defer { segmentConnectionChanges.removeAll() }
        return segmentConnectionChanges.map { ($0.key, $0.value) }
    }

    /// How many of `key`'s first bytes are known durable: its resume's synced prefix or its
    /// last checkpoint.
    public func durablePrefix(of key: Int) -> Int64 {
        guard let t = running[key] else { return 0 }
        return max(t.restartedFromZero ? 0 : t.request.resumeFrom, t.checkpointReported)
    }
}
