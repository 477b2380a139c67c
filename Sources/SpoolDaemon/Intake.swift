import Foundation
import Logging
import SpoolRequest
import SpoolStore
import SpoolWatcher

/// Turns names in `incoming/` into claimed, parsed requests: claims each file, validates it
/// whole, and files what cannot be used in `rejected/` with its reason (on the I/O queue).
///
/// Each claim holds one descriptor (its `flock`), so at most `maxClaims` requests are held;
/// further names wait here, in arrival order, and are claimed as earlier requests end.
final class Intake {
    private let store: SpoolStore
    private let io: IOQueue
    private let logger: Logger
    private var limits: ParseLimits
    let maxClaims: Int
    private var deferred: [String] = []
    private var deferredHead = 0
    private var deferredSet: Set<String> = []

    init(store: SpoolStore, io: IOQueue, logger: Logger, maxItems: Int, maxClaims: Int) {
        self.store = store
        self.io = io
        self.logger = logger
        self.maxClaims = maxClaims
        limits = ParseLimits(maxBytes: store.maxRequestBytes, maxItems: maxItems)
    }

    /// A reload: new limits for the request files parsed from now on.
    func update(maxItems: Int, maxRequestBytes: Int) {
        limits = ParseLimits(maxBytes: maxRequestBytes, maxItems: maxItems)
    }

    /// Names seen but not claimed yet.
    var deferredCount: Int { deferred.count - deferredHead }

    /// What became of a name in `incoming/`.
    enum Outcome {
        case claimed(ClaimedRequest)
        /// Not a request file the daemon may read (a symlink, a fifo): filed in `rejected/`.
        case rejected
        /// Nothing to do now: not a candidate, already gone, or deferred.
        case none
        /// The claim failed (logged); the file stays in `incoming/`.
        case failed
    }

    /// Claims `incoming/name` unless `claimed` requests are already held.
    func claim(_ name: String, claimed: Int) -> Outcome {
        guard DirectoryWatcher.isCandidate(name) else { return .none }
        if claimed >= maxClaims {
            if deferredSet.insert(name).inserted { deferred.append(name) }
            return .none
        }
        do {
            switch try store.claim(name) {
            case .gone:
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

    /// The names to claim now that requests have ended (up to the claim limit).
    func takeDeferred(claimed: Int) -> [String] {
        var names: [String] = []
        while claimed + names.count < maxClaims && deferredHead < deferred.count {
            let name = deferred[deferredHead]
            deferredHead += 1
            deferredSet.remove(name)
            names.append(name)
        }
        if deferredHead == deferred.count || deferredHead > 4096 {
            deferred.removeFirst(deferredHead)
            deferredHead = 0
        }
        return names
    }

    /// Validates a claimed request whole. A file that does not parse goes to `rejected/` with the
    /// line and the rule, and nil comes back.
    func parse(_ claim: ClaimedRequest) -> RequestFile? {
        do {
            return try RequestParser.parse(fileName: claim.name, bytes: claim.bytes, limits: limits)
        } catch {
            logger.warning("rejected a request file: \(error.description)", metadata: ["request": "\(claim.name)"])
            let record = ErrorRecord(request: claim.name, code: error.rule, message: error.message, line: error.line)
            let store = self.store
            io.submit {
                do throws(StoreError) { try store.reject(claim, record); return .rejected(request: claim.name, error: nil) }
                catch { return .rejected(request: claim.name, error: error) }
            }
            return nil
        }
    }

    /// The I/O queue filed a rejected request (or could not).
    func rejectionFiled(_ request: String, error: StoreError?) {
        io.completed()
        if let error { logger.error("could not file a rejected request: \(error)", metadata: ["request": "\(request)"]) }
    }
}

/// The process's descriptor limit: every claim holds one (its `flock`), so raise the soft limit
/// to what is needed (up to the hard limit) and bound the claims by what is available.
enum FileLimit {
    static func raise(wanting claims: Int, reserve: Int, logger: Logger) -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return max(1, claims) }
        let wanted = rlim_t(claims + reserve)
        if limit.rlim_cur < wanted {
            var raised = limit
            raised.rlim_cur = min(wanted, limit.rlim_max)
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let available = Int(limit.rlim_cur) - reserve
        if available < claims {
            logger.warning("the file limit allows fewer claims than asked", metadata: [
                "max-claims": "\(claims)", "allowed": "\(max(1, available))", "RLIMIT_NOFILE": "\(limit.rlim_cur)"])
        }
        return max(1, min(claims, available))
    }
}
