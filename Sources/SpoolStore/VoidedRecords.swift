import Foundation

/// `staging/B.voided`: a journal record of an item whose published file a recovery removed as
/// unverified (`RecoveryPlan.discardUnverified`), written whole (the record's one serialisation)
/// and synced before that file goes.
///
/// Why: the dead worker's journal that names the file stays until the adopted request ends. If
/// the adopter dies before the item is published again, the next adopter reads the same
/// `published` line, finds the file gone, and — with nothing more — takes it for a file a
/// consumer took: the item would end published with no file. `RecoveryFacts.gather` ignores a
/// journal record this one voids (same marker, same part inode), so the item is fetched again;
/// a later real publish journals a new marker (a new time, a new part) and wins. It is an item
/// staging file that outlives a recovery's start-over (the journal line outlives it too) and goes
/// at the group's end (`removeStaging`, `removeStagingOfEndedGroups`).
extension SpoolStore {
    /// Writes `staging/B.voided` naming `state` and makes it durable (data and folder).
    public func writeVoided(_ base: String, _ state: ItemState) throws(StoreError) {
        try layout.staging.writeAtomically(base + ".voided", SpoolJSON.encode(record: state), sync: true)
        try layout.staging.sync()
    }

    /// `staging/B.voided`, when it reads as a record.
    public func voided(_ base: String) -> ItemState? {
        guard let bytes = try? layout.staging.read(base + ".voided") else { return nil }
        return SpoolJSON.decode(ItemState.self, bytes)
    }
}

extension ItemState {
    /// Whether `voided` (an item's `B.voided`) names this record: the same marker, the same part.
    /// A later publish of the item has a marker of its own (its time) and a new part.
    public func isVoided(by voided: ItemState?) -> Bool {
        guard let voided, marker != nil else { return false }
        return voided.request == request && voided.index == index && voided.marker == marker && voided.inode == inode
    }
}
