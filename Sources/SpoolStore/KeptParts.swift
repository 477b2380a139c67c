import Foundation

/// Partials kept for `spoolfetch retry`: an item whose deadline cut its transfer fails, but what
/// it fetched stays in `staging/` as `B.kept.part` with its resume state `B.kept.state` (names
/// no group end removes). `retry` hands them to the item of its new request (`B'.part`,
/// `B'.state`, written for that item) and marks that request (`B'req.kept`), so the daemon that
/// claims it resumes them with `Range` + `If-Range` instead of fetching from byte 0.
///
/// Why by name rather than a lookup by URL at every start: only a retried request pays for it
/// (one `faccessat` per claim looks for the mark), and a part is never resumed by an item that
/// did not ask for it.
public enum KeptParts {
    static func keptBase(_ base: String) -> String { base + ".kept" }

    /// The mark that `request` has kept partials to resume: `staging/BASE.kept`.
    static func mark(_ request: String) -> String { SpoolStore.stagingBase(request) + ".kept" }

    /// Sets the item's part and state (`B.part`, `B.state`) aside as kept; false when it has
    /// not both (nothing worth resuming: no validator, or no bytes).
    public static func keep(_ base: String, in layout: SpoolLayout) -> Bool {
        let staging = layout.staging
        guard staging.exists(base + ".part"), staging.exists(base + ".state") else { return false }
        do throws(StoreError) {
            try staging.rename(base + ".part", to: keptBase(base) + ".part", in: staging, replace: true)
            try staging.rename(base + ".state", to: keptBase(base) + ".state", in: staging, replace: true)
            try staging.sync()
            return true
        } catch {
            return false
        }
    }

    /// Bytes kept for the item at `base`, nil when none are.
    public static func keptBytes(_ base: String, in layout: SpoolLayout) -> Int64? {
        guard let bytes = try? layout.staging.read(keptBase(base) + ".state"),
              let state = SpoolJSON.decode(ItemState.self, bytes) else { return nil }
        return state.bytes
    }

    /// Hands the kept partial of `request#index` to `newRequest#newIndex`: its state is written
    /// for the new item (its attempts counted afresh), the part renamed after it, the kept state
    /// removed. Call before the new request is in `incoming/`, then `markRequest`. False when
    /// there is none.
    public static func hand(from request: String, index: Int, to newRequest: String, index newIndex: Int,
                            in layout: SpoolLayout) throws(StoreError) -> Bool {
        let staging = layout.staging
        let old = keptBase(SpoolStore.stagingBase(request, index: index))
        let new = SpoolStore.stagingBase(newRequest, index: newIndex)
        guard staging.exists(old + ".part"), let bytes = try? staging.read(old + ".state"),
              var state = SpoolJSON.decode(ItemState.self, bytes) else { return false }
        state.request = newRequest
        state.index = newIndex
        state.attempts = 0
        try staging.writeAtomically(new + ".state", SpoolJSON.encode(record: state), sync: true)
        try staging.rename(old + ".part", to: new + ".part", in: staging, replace: true)
        staging.remove(old + ".state")
        try staging.sync()
        return true
    }

    /// The name in `staging/` of item `index`'s kept partial, if it has one (see `hand`).
    public static func keptPartName(of request: String, index: Int) -> String {
        keptBase(SpoolStore.stagingBase(request, index: index)) + ".part"
    }

    /// Marks `request` as having kept partials handed to it (see `hand`).
    public static func markRequest(_ request: String, in layout: SpoolLayout) throws(StoreError) {
        try layout.staging.writeAtomically(mark(request), [], sync: true)
    }

    /// Whether `request` was marked, taking the mark away (the daemon's claim, once).
    public static func takeMark(_ request: String, in layout: SpoolLayout) -> Bool {
        guard layout.staging.exists(mark(request)) else { return false }
        layout.staging.remove(mark(request))
        return true
    }
}
