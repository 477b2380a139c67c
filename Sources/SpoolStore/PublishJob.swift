/// One verified item to publish.
///
/// A value with its fields in one shared box, copied only when a shared job is changed (as
/// `Array` does). Why: a job is handed along half a dozen times per item — the item's phase, the
/// publisher's queue, the batch, its result — and its two records hold some twenty strings: as a
/// plain struct a copy and its release cost about two thousand instructions (callgrind).
public struct PublishJob: Sendable {
    public var part: StagingFile {
        get { storage.part }
        _modify { yield &unique().part }
    }
    public var state: ItemState {
        get { storage.state }
        _modify { yield &unique().state }
    }
    /// Its marker (also inside `state`); `name` is the wished-for final name.
    public var marker: ItemMarker {
        get { storage.marker }
        _modify { yield &unique().marker }
    }
    /// Set when an earlier attempt already renamed the data (its marker failed): only the marker remains.
    public var alreadyPublishedAs: String? {
        get { storage.alreadyPublishedAs }
        _modify { yield &unique().alreadyPublishedAs }
    }
    /// false for a request with `markers: group`: no `NAME.done` is written; the item counts as
    /// published once its data is durable under its final name (the group marker, written by the
    /// group end, lists it).
    public var writesMarker: Bool {
        get { storage.writesMarker }
        _modify { yield &unique().writesMarker }
    }
    /// `on-exists: replace` (and a changed resource under `skip-unchanged`): the file takes the
    /// wished-for name whatever was there — the old marker is removed first, the data renamed
    /// over the old data, then the new marker put in place — instead of a free `-N` name.
    public var replacesExisting: Bool {
        get { storage.replacesExisting }
        _modify { yield &unique().replacesExisting }
    }

    public init(part: StagingFile, state: ItemState, marker: ItemMarker, alreadyPublishedAs: String? = nil,
                writesMarker: Bool = true, replacesExisting: Bool = false) {
        storage = Storage(part: part, state: state, marker: marker, alreadyPublishedAs: alreadyPublishedAs,
                          writesMarker: writesMarker, replacesExisting: replacesExisting)
    }

    private var storage: Storage

    /// The box, made this job's own before a change if another job shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage
    }

    /// Unchecked: a box is changed only through `unique()`, that is only while one job holds it,
    /// so a box two threads can see is never written.
    private final class Storage: @unchecked Sendable {
        var part: StagingFile
        var state: ItemState
        var marker: ItemMarker
        var alreadyPublishedAs: String?
        var writesMarker: Bool
        var replacesExisting: Bool

        init(part: StagingFile, state: ItemState, marker: ItemMarker, alreadyPublishedAs: String?,
             writesMarker: Bool, replacesExisting: Bool) {
            self.part = part
            self.state = state
            self.marker = marker
            self.alreadyPublishedAs = alreadyPublishedAs
            self.writesMarker = writesMarker
            self.replacesExisting = replacesExisting
        }

        func copy() -> Storage {
            Storage(part: part, state: state, marker: marker, alreadyPublishedAs: alreadyPublishedAs,
                    writesMarker: writesMarker, replacesExisting: replacesExisting)
        }
    }
}
