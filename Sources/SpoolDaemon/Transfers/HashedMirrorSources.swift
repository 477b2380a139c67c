import Foundation
import Logging
import SpoolCore
import SpoolRequest

/// `--hashed-mirror` (`ContentStoreRoom`): templates with `{sha256}` in each, tried in order
/// before an item's own URL, and the items fetching from one now. Its own type because a mirror's
/// failure never reaches the item's machine: the walk through the templates is state of its own,
/// kept per item until the item has its body, moves on to its own URL, or ends (`forget`).
struct HashedMirrorSources {
    private(set) var templates: [String]
    /// Items fetching from a hashed mirror now: which one, and the credentials their own URL needs after it.
    private var onMirror: [Int: (index: Int, credentials: [RequestHeader])] = [:]

    init(templates: [String]) { self.templates = templates }

    /// A reload: the new templates, for fetches that start from now on.
    mutating func update(templates: [String]) { self.templates = templates }

    /// The URL an item's fetch asks first: its first hashed mirror, when it has a digest and keeps
    /// nothing of an earlier attempt (a partial is resumed from its own source); else nil (its own URL).
    mutating func first(_ record: ItemRecord, _ item: RequestItem, credentials: [RequestHeader]) -> String? {
        guard !templates.isEmpty, let digest = ContentStoreRoom.digest(of: item), record.bytesOnDisk == 0,
              record.keptRanges == nil else { return nil }
        onMirror[record.key] = (0, credentials)
        return templates[0].replacingOccurrences(of: "{sha256}", with: digest)
    }

    /// A transfer of the item ended. When it was a hashed mirror's and did not bring the body — a
    /// 404 or any other failure but a full disk, or a body of another digest — the item moves on to
    /// the next hashed mirror or its own URL: the answer (`next` nil: its own URL) is the source to
    /// start now, and the item's machine never sees that transfer, so no attempt is spent.
    mutating func fallThrough(_ record: ItemRecord, _ end: TransferEnd,
                              logger: Logger) -> (next: String?, credentials: [RequestHeader])? {
        guard let (index, credentials) = onMirror.removeValue(forKey: record.key), let item = record.loaded,
              let digest = ContentStoreRoom.digest(of: item) else { return nil }
        if end.fault == nil && end.sha256 == digest { return nil }
        if end.fault?.diskFull == true || end.fault?.cancelled == true { return nil }
        let why = end.fault.map { $0.httpStatus.map { "HTTP \($0)" } ?? $0.code } ?? "a body with another sha256"
        logger.info("hashed mirror could not serve the item; next source", metadata: [
            "item": "\(record.id)", "mirror": "\(templates[index].replacingOccurrences(of: "{sha256}", with: digest))", "why": "\(why)"])
        let next = index + 1
        guard next < templates.count else { return (nil, credentials) }
        onMirror[record.key] = (next, credentials)
        return (templates[next].replacingOccurrences(of: "{sha256}", with: digest), credentials)
    }

    /// The item left its running phase or ended: no mirror walk of its is under way.
    mutating func forget(_ key: Int) { onMirror[key] = nil }
}
