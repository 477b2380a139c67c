import Foundation
import Logging
import SpoolCore
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// An upload item's file: who it was when first seen (intake, or the first start of an adopted
/// item), and what its last transfer got: the response's body (until its record is written)
/// and the SHA-256 of the bytes sent. The descriptor it is sent from is its running phase's
/// (`RunningAttempt.upload`).
struct UploadState {
    var identity: OutgoingIdentity?
    var response: [UInt8]?
    /// The SHA-256 of the bytes the server accepted (for the item hook).
    var sha256: String?
}

/// Why an upload could not start.
enum UploadStartError: Error {
    /// The file is gone, no longer sendable, or not the file that was queued: the item fails.
    case refused(OutgoingRefusal)
    /// The session would not take the transfer.
    case session(StoreError)
}

/// Upload items' transfers (`TransferDriver` holds one and asks it): the file opened with the
/// owner's rights and checked against what was queued, sent from the descriptor its running
/// attempt holds, and checked once more when the transfer ends. Its own type
/// because an upload shares nothing of a download's part, resume or segments.
final class UploadTransfers {
    private let session: TransferSession
    private let store: SpoolStore
    private let states: ResumeStates
    private let urls: URLPrivacy
    private let logger: Logger

    init(session: TransferSession, store: SpoolStore, states: ResumeStates, urls: URLPrivacy, logger: Logger) {
        self.session = session
        self.store = store
        self.states = states
        self.urls = urls
        self.logger = logger
    }

    /// Opens `outgoing/NAME` (`SpoolStore.openOutgoing`: no symlink, a regular file with one
    /// link), checks that it is the file first seen — the same inode, size, mtime and ctime — and
    /// adds its transfer, sent whole from byte 0.
    /// `request` makes the transfer's request for the file (`TransferRequests`). Returns the
    /// attempt that holds the open file, for the running phase (`partOpened`).
    func start(_ record: ItemRecord, _ item: RequestItem, _ upload: Upload,
               request makeRequest: (UploadSource) -> TransferRequest) throws(UploadStartError) -> RunningAttempt {
        record.noteStarted(at: Date())
        let opened: (fd: Int32, identity: OutgoingIdentity)
        // With the owner's rights: a file its owner could not read fails `upload-not-permitted`.
        do throws(OutgoingRefusal) { opened = try store.openOutgoing(upload.name, owner: record.request.owner) } catch {
            throw .refused(error.rule == "upload-missing" && record.upload.identity != nil
                ? OutgoingRefusal(rule: "upload-changed", reason: error.reason + " any more (it was there when queued)") : error)
        }
        var state = record.upload
        if let first = state.identity, first != opened.identity {
            Glibc.close(opened.fd)
            throw .refused(OutgoingRefusal(rule: "upload-changed", reason: "outgoing/\(upload.name) changed after it was queued "
                                           + Self.change(from: first, to: opened.identity)))
        }
        state.identity = opened.identity
        state.response = nil
        state.sha256 = nil
        let attempt = RunningAttempt(sending: opened.fd, digest: OutgoingDigest(fd: opened.fd, size: opened.identity.size))
        record.noteUpload(state)
        record.uploadSent(0)
        // Its attempts outlive a crash, as a large download's do (`B.state`, phase running): a
        // restart after a kill mid-body sends the body again and counts that attempt too, so the
        // record says how often the body went out. Recovery finds no part and starts it over.
        states.write(record, ItemState(request: record.request.name, index: record.index, url: urls.shown(item.url.string),
                                     phase: .running, attempts: record.attempts,
                                     startedAt: record.startedAt.map(RFC3339.format), bootID: BootID.current))
        let request = makeRequest(UploadSource(fd: opened.fd, size: opened.identity.size, method: upload.method.rawValue,
                                               contentType: upload.contentType))
        do {
            try session.start(key: record.key, request: request)
        } catch {
            attempt.closeUpload()
            throw .session(StoreError("curl_multi_add_handle", "\(urls.shown(item.url.string)) (\(error))", errno: EIO))
        }
        logger.debug("upload started", metadata: ["item": "\(record.id)", "url": "\(urls.shown(item.url.string))",
                                                  "file": "\(upload.name)", "bytes": "\(opened.identity.size)",
                                                  "attempt": "\(record.attempts)"])
        return attempt
    }

    /// An upload's transfer ended: its file closed, and checked once more — a file written to
    /// while it was sent fails the item rather than leave a mix on the server.
    func ended(_ record: ItemRecord, _ outcome: TransferOutcome) -> TransferEnd {
        var failure = outcome.failure
        var state = record.upload
        let sending = record.attempt?.upload
        if let sending, let first = state.identity, let now = SpoolStore.identity(of: sending.fd), now != first,
           failure == nil || failure == .cancelled || failure?.isTransient == true {
            failure = .uploadChanged(Self.change(from: first, to: now))
        }
        // The file was the same before and after: its digest is that of the bytes sent.
        let digest = failure == nil ? sending?.digest.wait() : nil
        if failure == nil && digest == nil { failure = .uploadChanged("it could not be read whole to hash it") }
        state.response = failure == nil ? outcome.responseBody : nil
        state.sha256 = digest
        record.noteUpload(state)
        record.attempt?.closeUpload()
        record.noteResponse(outcome.facts)
        record.uploadSent(failure == nil && digest != nil ? outcome.bytesOnDisk : 0)
        if failure == nil, let digest {
            return TransferEnd(failure: nil, sha256: digest, retryAfter: nil, hasPartial: false)
        }
        let reason = failure ?? .curl(code: -1, text: "no result")
        record.noteFailure(reason)
        return TransferEnd(failure: reason, sha256: nil, retryAfter: outcome.facts.retryAfter, hasPartial: false,
                           outage: reason == outcome.failure && outcome.isOutage)
    }

    /// What differs between two looks at a file, for the `upload-changed` message.
    static func change(from a: OutgoingIdentity, to b: OutgoingIdentity) -> String {
        if a.inode != b.inode || a.device != b.device { return "(another file took its name)" }
        if a.size != b.size { return "(\(a.size) bytes, now \(b.size))" }
        return "(written to: its modification or change time moved)"
    }

    /// A failed upload item's file goes into `failed/`, beside its request, on the I/O queue —
    /// unless the request's owner could not read it (`upload-not-permitted`): someone else's
    /// file stays where its owner put it.
    func fileFailed(_ record: ItemRecord, code: String, io: IOQueue) {
        // Its file was closed when its transfer ended or was stopped (or with its running phase).
        guard record.summary.isUpload, let name = record.details?.upload?.name else { return }
        guard code != "upload-not-permitted" else { return }
        let store = self.store
        io.submit {
            do throws(StoreError) { try store.moveOutgoing(name, failed: true); return .outgoingFiled(name: name, error: nil) }
            catch { return .outgoingFiled(name: name, error: error) }
        }
    }
}
