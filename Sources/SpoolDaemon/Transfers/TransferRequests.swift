import Foundation
import SpoolConfiguration
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// The one place an item's transfer request is made (downloads, uploads, hashed mirrors; a
/// segment is made from its primary's by `TransferRequest.segment`), so a new request field is
/// set once for all of them. A value `TransferDriver` keeps, made again from the configuration
/// in force at a reload (which changes the limits of what starts next): it keeps no state
/// between requests.
struct TransferRequests {
    let configuration: DaemonConfiguration
    let store: SpoolStore
    /// The conditional headers of `skip-unchanged`, and what a `304` means (`ConditionalFetch`).
    let conditional: ConditionalFetch

    init(configuration: DaemonConfiguration, store: SpoolStore) {
        self.configuration = configuration
        self.store = store
        conditional = ConditionalFetch(store: store)
    }

    /// What a transfer carries: a download's part and where it resumes, or an upload's file.
    enum Body {
        /// `hashedMirror`: a `--hashed-mirror` URL asked instead of the item's own, with none of
        /// the item's headers or credentials (they are for its own server).
        /// `attempt`: the running phase's, which keeps the marker a conditional request asks on.
        case download(StagingFile, RunningAttempt, resumeFrom: Int64, hashedMirror: String? = nil)
        case upload(UploadSource)
    }

    /// The one builder of an item's transfer request, for downloads and uploads alike (a segment
    /// is made from its primary's, `TransferRequest.segment`): the URL of the item's current
    /// source (or the refresh hook's), its headers with the credentials' in place and the
    /// credentials' SigV4 keys and client certificate (`CredentialIdentity`); a download
    /// adds its conditional headers, its part, resume, size limit, checkpoints, rate group and
    /// segments; an upload its file, sent whole.
    func request(_ record: ItemRecord, _ item: RequestItem, credentials: [RequestHeader], body: Body) -> TransferRequest {
        let url = (record.currentURL ?? item.url).string
        let own = CredentialIdentity.split(credentials)
        let headers = Self.headers(item.headers, credentials: own.headers).map(\.line)
        switch body {
        case .upload(let source):
            var request = TransferRequest(url: url, headers: headers, destination: -1)
            request.upload = source
            request.awsSigV4 = own.signing
            request.clientIdentity = own.identity
            return request
        case .download(let part, let attempt, let resumeFrom, let hashedMirror):
            var request = TransferRequest(
                url: hashedMirror ?? url, headers: hashedMirror != nil ? [] : headers + conditional.headers(attempt, item, resumeFrom: resumeFrom),
                destination: part.fd,
                resumeFrom: resumeFrom, prefixHash: resumeFrom > 0 ? record.hash : nil,
                ifRange: resumeFrom > 0 ? record.validator : nil, maxBytes: sizeLimit(item),
                // A small body of an unnamed part may be written off the engine's thread (a crash
                // loses an unnamed part either way; see `ReceivedBody`) — under `markers: group`
                // only: with a marker per file the publisher's thread has the most to do, and a
                // third busy thread on two cores slows those drains down.
                writeBehind: !part.isNamed && resumeFrom == 0 && !record.writesItemMarker,
                syncEvery: configuration.syncEvery,
                rateGroup: record.request.settings.maxRate.map { RateGroup(name: record.request.name, bytesPerSecond: $0) })
            request.maxSegments = min(configuration.maxSegments, item.segments ?? .max)
            // The credentials' identity is for the item's own server, never a hashed mirror.
            if hashedMirror == nil {
                request.awsSigV4 = own.signing
                request.clientIdentity = own.identity
            }
            // A segmented part recovered in this boot: only its missing ranges are fetched.
            if resumeFrom > 0 || record.keptRanges != nil, let validator = record.validator, let kept = record.keptRanges {
                request.keptRanges = kept
                request.ifRange = validator
            }
            return request
        }
    }

    /// The request's headers with the credentials file's in place of any of the same name.
    static func headers(_ own: [RequestHeader], credentials: [RequestHeader]) -> [RequestHeader] {
        guard !credentials.isEmpty else { return own }
        let replaced = Set(credentials.map { $0.name.lowercased() })
        return own.filter { !replaced.contains($0.name.lowercased()) } + credentials
    }

    /// The size limit of an item: its `max-bytes`, else `expected-bytes` × slack; never above
    /// the daemon-wide `--max-bytes`.
    func sizeLimit(_ item: RequestItem) -> Int64? {
        var limit: Int64? = item.maxBytes
        if limit == nil, let expected = item.expectedBytes {
            let scaled = Double(expected) * configuration.expectSlack
            limit = scaled >= Double(Int64.max) ? nil : max(Int64(scaled), expected)
        }
        if configuration.maxBytes > 0 { limit = min(limit ?? configuration.maxBytes, configuration.maxBytes) }
        return limit
    }

    /// What a `too-large` failure adds to its message when the limit came from `expected-bytes`.
    func tooLargeHint(_ item: RequestItem) -> String? {
        guard item.maxBytes == nil, item.expectedBytes != nil else { return nil }
        return " (expected-bytes × \(configuration.expectSlack); set max-bytes to allow more)"
    }
}
