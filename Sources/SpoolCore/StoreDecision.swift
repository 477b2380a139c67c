/// What an item with a known `sha256:` does when its transfer would start and the content store is
/// on (`--store`): publish from the store, wait for the fetch another item runs, or fetch itself.
/// Asked again, with fresh facts, each time a waiting item is checked. Pure: the shell reads the
/// facts (the entry's presence, this worker's fetches, the claim file) and carries the answer out.
///
/// | wanted digest | entry in the store | this worker fetches it (another item) | claim on the spool | decision |
/// |---|---|---|---|---|
/// | none, or the store off | | | | fetch (the store not involved) |
/// | given | yes | | | hit |
/// | given | no | yes | | wait (for that item) |
/// | given | no | no | none, or this item's own | fetch (claim it first) |
/// | given | no | no | another's, live | wait (for the holder's item) |
/// | given | no | no | another's, stale or its process gone | fetch (break the claim, then claim it) |
public enum StoreDecision: Sendable, Hashable {
    /// Fetch from the item's sources; `claim`: claim the digest first (`breaking`: the stale claim seen).
    case fetch(claim: Bool, breaking: Bool)
    /// Publish from the store's entry; no request.
    case hit
    /// Another fetch of this digest is under way: wait for it. `by`: the item that fetches it
    /// (`REQUEST#INDEX`), `elsewhere`: on another worker.
    case wait(by: String, elsewhere: Bool)

    /// The spool-wide claim on the digest, as read (nil when this worker fetches it: not read).
    public enum Claim: Sendable, Hashable {
        case none
        case own
        case live(item: String)
        case stale(item: String)
    }

    public static func decide(digest: String?, storeOn: Bool, entryPresent: Bool, localFetcher: String?,
                              claim: Claim?) -> StoreDecision {
        guard storeOn, digest != nil else { return .fetch(claim: false, breaking: false) }
        if entryPresent { return .hit }
        if let localFetcher { return .wait(by: localFetcher, elsewhere: false) }
        switch claim ?? .none {
        case .none, .own: return .fetch(claim: true, breaking: false)
        case .live(let item): return .wait(by: item, elsewhere: true)
        case .stale: return .fetch(claim: true, breaking: true)
        }
    }
}
