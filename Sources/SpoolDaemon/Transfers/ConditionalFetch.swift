import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// `on-exists: skip-unchanged`: a fresh transfer asks with the existing file's validators, and a
/// 304 ends the item with that file instead of publishing a new one. A value asked by
/// `TransferRequests` (the question) and `TransferBook.ended` (the answer, through `TransferShell`); the running phase's
/// attempt keeps which marker was asked on, so it holds no state of its own.
struct ConditionalFetch {
    let store: SpoolStore

    /// `If-None-Match` (the previous marker's ETag) and `If-Modified-Since` (its Last-Modified)
    /// for an item under `skip-unchanged` whose final name already holds a file with a marker;
    /// none for a resumed transfer (its `If-Range` asks another question) or without validators.
    func headers(_ attempt: RunningAttempt, _ item: RequestItem, resumeFrom: Int64) -> [String] {
        attempt.askedConditionally(on: nil)
        guard item.onExists == .skipUnchanged, resumeFrom == 0,
              let previous = store.readMarker(ofPublished: item.name) else { return [] }
        // A marker is the daemon's own file, but a header value must never carry a line break.
        func usable(_ value: String?) -> String? {
            guard let value, !value.isEmpty, !value.contains(where: { $0 == "\r" || $0 == "\n" }) else { return nil }
            return value
        }
        var headers: [String] = []
        if let etag = usable(previous.etag) { headers.append("If-None-Match: \(etag)") }
        if let lastModified = usable(previous.lastModified) { headers.append("If-Modified-Since: \(lastModified)") }
        if !headers.isEmpty { attempt.askedConditionally(on: previous) }
        return headers
    }

    /// The existing file, when the transfer asked conditionally (the server answered 304:
    /// `TransferBook` asks only then); the empty part is removed then (there is nothing to publish).
    func notModified(_ record: ItemRecord) -> UnchangedFile? {
        guard let previous = record.attempt?.previousMarker else { return nil }
        record.partDiscarded()
        store.removePart(record.base)
        return UnchangedFile(file: previous.name, marker: store.markerPath(ofPublished: previous.name))
    }

    /// The existing file's facts for the published phase a 304 ends the item in (the event
    /// carries them): the marker the attempt asked on, which the running phase still holds.
    static func receipt(_ record: ItemRecord) -> PublishedReceipt? {
        record.attempt?.previousMarker.map(PublishedReceipt.init)
    }
}
