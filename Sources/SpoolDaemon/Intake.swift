import Foundation
import Logging
import SpoolRequest
import SpoolStore
import SpoolWatcher

/// Turns names in `incoming/` into claimed, parsed requests: claims each file (a rename into this
/// worker's folder; no descriptor is held), validates it whole, and files what cannot be used in
/// `rejected/` with its reason (on the I/O queue). Every name is claimed as soon as it is seen:
/// there is no claim limit, so a request due now never waits behind requests due later.
final class Intake {
    private let store: SpoolStore
    private let io: IOQueue
    private let logger: Logger
    private var limits: ParseLimits

    init(store: SpoolStore, io: IOQueue, logger: Logger, maxItems: Int, maxRequestBytes: Int) {
        self.store = store
        self.io = io
        self.logger = logger
        limits = ParseLimits(maxBytes: maxRequestBytes, maxItems: maxItems)
    }

    /// A reload: new limits for the request files parsed from now on.
    func update(maxItems: Int, maxRequestBytes: Int) {
        limits = ParseLimits(maxBytes: maxRequestBytes, maxItems: maxItems)
    }

    /// What became of a name in `incoming/`.
    enum Outcome {
        case claimed(ClaimedRequest)
        /// Not a request file the daemon may read (a symlink, a fifo): filed in `rejected/`.
        case rejected
        /// Nothing to do: not a candidate, or already gone.
        case none
        /// The claim failed (logged); the file stays in `incoming/`.
        case failed
    }

    func claim(_ name: String) -> Outcome {
        guard DirectoryWatcher.isCandidate(name) else { return .none }
        do {
            switch try store.claim(name) {
            case .gone:
                return .none
            case .lost:
                logger.debug("another worker claimed the request first", metadata: ["request": "\(name)"])
                return .none
            case .refused(let code, let message):
                logger.warning("rejected a request file: \(message)", metadata: ["request": "\(name)", "code": "\(code)"])
                let record = ErrorRecord(request: name, code: code, message: message)
                let store = self.store
                io.submit {
                    do throws(StoreError) { try store.rejectUnclaimed(name, record); return .rejected(request: name, error: nil) }
                    catch { return .rejected(request: name, error: error) }
                }
                return .rejected
            case .claimed(let claim):
                return .claimed(claim)
            }
        } catch {
            logger.error("could not claim a request file: \(error)", metadata: ["request": "\(name)"])
            return .failed
        }
    }
    /// Validates a claimed request whole, reading it from its file in chunks, and returns its
    /// index (the file's settings and one small summary per item; none of its text). A file that
    /// does not parse goes to `rejected/` with the line and the rule. A file that cannot be read
    /// (an I/O error, not the file's fault) is logged and left claimed: the next run adopts it.
    ///
    /// `checkUploads`: each upload item's file must be in `outgoing/` and sendable (a fresh
    /// claim; an adopted request's files were checked at its claim, and may since have been sent
    /// and moved on).
    func parse(_ claim: ClaimedRequest, checkUploads: Bool) -> Parsed {
        do {
            let fd: Int32
            do { fd = try claim.openFile() } catch {
                logger.error("could not read a claimed request file; it stays claimed for the next run: \(error)",
                             metadata: ["request": "\(claim.name)"])
                return .unreadable
            }
            defer { close(fd) }
            let index = try RequestParser.index(fileName: claim.name, descriptor: fd, limits: limits)
            var uploads: [Int: OutgoingIdentity] = [:]
            if checkUploads {
                switch checkOutgoing(index) {
                case .success(let found): uploads = found
                case .failure(let refusal):
                    reject(claim, refusal)
                    return .rejected
                }
            }
            return .indexed(index, uploads: uploads)
        } catch {
            switch error {
            case .rejected(let rejection):
                reject(claim, rejection)
                return .rejected
            case .unreadable:
                logger.error("could not read a claimed request file; it stays claimed for the next run: \(error)",
                             metadata: ["request": "\(claim.name)"])
                return .unreadable
            }
        }
    }

    /// What became of a claimed request file.
    enum Parsed {
        /// Parsed; `uploads`: each upload item's file as intake found it (by item index).
        case indexed(RequestIndex, uploads: [Int: OutgoingIdentity])
        /// Refused (filed in `rejected/` on the I/O queue).
        case rejected
        /// Could not be read; left claimed.
        case unreadable
    }

    /// Each upload item's file as found now (by item index), or the first that cannot be sent,
    /// as a rejection on its `url` line.
    private func checkOutgoing(_ index: RequestIndex) -> Result<[Int: OutgoingIdentity], RequestRejection> {
        var found: [Int: OutgoingIdentity] = [:]
        for upload in index.uploads {
            do throws(OutgoingRefusal) { found[upload.index] = try store.checkOutgoing(upload.name) } catch {
                return .failure(RequestRejection(file: index.fileName, line: upload.line, rule: error.rule,
                                                 message: "upload: " + error.reason + "; nothing was sent"))
            }
        }
        return .success(found)
    }

    private func reject(_ claim: ClaimedRequest, _ rejection: RequestRejection) {
        logger.warning("rejected a request file: \(rejection.description)", metadata: ["request": "\(claim.name)"])
        let record = ErrorRecord(request: claim.name, code: rejection.rule, message: rejection.message, line: rejection.line)
        let store = self.store
        io.submit {
            do throws(StoreError) { try store.reject(claim, record); return .rejected(request: claim.name, error: nil) }
            catch { return .rejected(request: claim.name, error: error) }
        }
    }

    /// The I/O queue filed a rejected request (or could not).
    func rejectionFiled(_ request: String, error: StoreError?) {
        io.completed()
        if let error { logger.error("could not file a rejected request: \(error)", metadata: ["request": "\(request)"]) }
    }
}
