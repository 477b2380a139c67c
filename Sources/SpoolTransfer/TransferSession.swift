internal import CCurl
import Foundation

/// The one shared transfer session: a single `CURLM` multi handle that runs every download.
///
/// Not thread-safe by design: one engine thread owns it, calls `start`, `remove`, `perform` and
/// `wait`. Other threads may only use its `waker`, to interrupt `wait`.
public final class TransferSession {
    let multi: UnsafeMutableRawPointer
    let configuration: TransferConfiguration
    /// The proxy variables as they were when the session started (libcurl reads the same ones).
    let proxies = ProxyEnvironment()
    /// The session-wide rate limit (`TransferConfiguration.maxRate`, `setMaxRate`).
    let gate = RateGate()
    /// Raised by a body's writer after a checkpoint (see `takeCheckpoints`).
    let checkpoints = CheckpointFlag()
    var running: [Int: Transfer] = [:]
    /// Items fetched in segments, by key (see `SegmentSet`), and those never to be split again
    /// (a segment broke a promise).
    var segmentSets: [Int: SegmentSet] = [:]
    var segmentsRefused: Set<Int> = []
    /// Running transfers whose body may be split (`mayBeSplit`), not split yet.
    var splittable: Set<Int> = []
    var segmentConnectionChanges: [Int: Int] = [:]
    let hashResults = HashResults()
    /// Segmented items' outcomes, handed out by the next `performTransfers`.
    var finishedOutcomes: [TransferOutcome] = []
    /// Wakes `wait` from any thread.
    public let waker: TransferWaker
    /// The caller's rules on room for bodies, asked before a body's first byte (see `BodyRoom`).
    public let room = BodyRoom()

    /// libcurl's global init is not thread-safe; do it once, before any other thread exists.
    /// Its result is kept: every session refuses to start when it failed.
    private static let globalInit: CURLcode = {
        signal(SIGPIPE, SIG_IGN)
        return curl_global_init(Int(CURL_GLOBAL_ALL))
    }()

    public init(configuration: TransferConfiguration) throws(TransferSetupError) {
        let initialized = Self.globalInit
        guard initialized == CURLE_OK else {
            throw .init(option: "curl_global_init", code: Int(initialized.rawValue))
        }
        guard let m = curl_multi_init() else { throw .init(option: "curl_multi_init", code: -1) }
        multi = m
        self.configuration = configuration
        waker = TransferWaker(multi: m)
        gate.setRate(configuration.maxRate)
        do {
            try Self.setConnectionLimits(m, perHost: configuration.maxHostConnections, streams: configuration.maxStreams,
                                         proxied: !proxies.isEmpty)
        } catch {
            waker.invalidate()
            curl_multi_cleanup(m)
            throw TransferSetupError(error)
        }
        if configuration.maxConnections > 0 {
            do {
                try MultiCall.check("CURLMOPT_MAX_TOTAL_CONNECTIONS",
                                    spoolfetch_multi_setopt_long(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections))
                // Keep enough idle connections for reuse across items.
                try MultiCall.check("CURLMOPT_MAXCONNECTS",
                                    spoolfetch_multi_setopt_long(m, CURLMOPT_MAXCONNECTS, configuration.maxConnections))
            } catch {
                waker.invalidate()
                curl_multi_cleanup(m)
                throw TransferSetupError(error)
            }
        }
    }

    deinit {
        for (_, set) in segmentSets {
            for s in set.segments { gate.forget(s); curl_multi_remove_handle(multi, s.easy.raw) }
        }
        for (_, t) in running {
            gate.forget(t)
            curl_multi_remove_handle(multi, t.easy.raw)
        }
        running.removeAll()
        waker.invalidate()
        curl_multi_cleanup(multi)
    }

    public var runningCount: Int { running.count }

    /// Bytes on disk and the expected total of a running transfer (for status and progress).
    public func progress(of key: Int) -> (bytes: Int64, total: Int64?)? {
        if let set = segmentSets[key] { return (set.bytesOnDisk, set.total) }
        guard let t = running[key] else { return nil }
        if let upload = t.request.upload { return (t.sending.sent, upload.size) }
        let total: Int64? = t.facts.rangeTotal ?? t.facts.contentLength.map { $0 + (t.facts.rangeStart ?? 0) }
        return (t.bytesOnDisk, total)
    }

    /// Adds a download to the session. It runs during later `perform` calls.
    public func start(key: Int, request: TransferRequest, maxRecvSpeed: Int64 = 0) throws(TransferSetupError) {
        // A fresh handle per transfer: the connection pool and DNS cache live in the multi handle
        // anyway, and libcurl 7.88 refuses CURLOPT_BUFFERSIZE on a reset handle whose last
        // transfer failed in some ways (its receive buffer is still allocated).
        let easy = try EasyHandle()
        var request = request
        // In front of kept ranges the primary asks only up to the first (a closed range).
        if let first = Self.keptRangesStart(request) { request.rangeEnd = max(first, request.resumeFrom + 1) }
        let transfer = Transfer(key: key, easy: easy, request: request, proxies: proxies, gate: gate, checkpoints: checkpoints,
                                room: room)
        try configure(easy, for: transfer, maxRecvSpeed: maxRecvSpeed)
        splittable.remove(key)
        running[key] = transfer
        gate.join(transfer, group: request.rateGroup)
        adoptKeptRanges(transfer)
        let code = curl_multi_add_handle(multi, easy.raw)
        if code != CURLM_OK {
            running.removeValue(forKey: key)
            gate.forget(transfer)
            segmentSets.removeValue(forKey: key)
            throw TransferSetupError(option: "curl_multi_add_handle", code: Int(code.rawValue))
        }
    }

    /// New `--per-host` and `--max-streams` (a reload), and `total` (`--concurrency`) when given;
    /// connections already open stay.
    public func setConnectionLimits(perHost: Int, streams: Int, total: Int? = nil) throws(TransferSessionError) {
        try Self.setConnectionLimits(multi, perHost: perHost, streams: streams, proxied: !proxies.isEmpty)
        if let total, total > 0 {
            try MultiCall.check("CURLMOPT_MAX_TOTAL_CONNECTIONS",
                                spoolfetch_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, total))
            try MultiCall.check("CURLMOPT_MAXCONNECTS", spoolfetch_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, total))
        }
    }

    /// libcurl's own bounds under the scheduler's: streams per HTTP/2 connection, and connections
    /// per host. The latter not through a proxy, where libcurl counts every connection against
    /// the proxy's host and the daemon's other hosts would wait for one host's limit.
    private static func setConnectionLimits(_ m: UnsafeMutableRawPointer, perHost: Int, streams: Int,
                                            proxied: Bool) throws(TransferSessionError) {
        try MultiCall.check("CURLMOPT_MAX_CONCURRENT_STREAMS",
                            spoolfetch_multi_setopt_long(m, CURLMOPT_MAX_CONCURRENT_STREAMS, max(1, streams)))
        try MultiCall.check("CURLMOPT_MAX_HOST_CONNECTIONS",
                            spoolfetch_multi_setopt_long(m, CURLMOPT_MAX_HOST_CONNECTIONS, proxied ? 0 : max(0, perHost)))
    }

    /// Changes the session-wide rate limit (bytes per second over all transfers; 0: none), for
    /// example after a configuration reload. Takes effect at the next chunk.
    public func setMaxRate(_ bytesPerSecond: Int64) {
        gate.setRate(bytesPerSecond)
    }

    /// Response body bytes received by every transfer of the session so far.
    public var bodyBytesReceived: Int64 { gate.bytesAdmitted }

    /// When transfers paused by the rate limit are due to resume; nil when none is paused. The
    /// engine sleeps no longer than this (then `performTransfers` resumes them).
    public func nextRateDeadline() -> Date? {
        gate.nextDeadline
    }

    /// Changes the receive-rate cap of one running transfer (libcurl's per-handle limit). Not
    /// needed with `TransferConfiguration.maxRate`, which holds the cap across all transfers.
    public func setMaxRecvSpeed(_ key: Int, _ bytesPerSecond: Int64) {
        guard let t = running[key] else { return }
        // Cannot fail for a valid handle and a non-negative speed (libcurl only range-checks it).
        try? t.easy.set(.maxRecvSpeed, max(0, bytesPerSecond))
    }

    /// Removes a running transfer (pause, cancel, shutdown). Returns its outcome as `.cancelled`,
    /// with the bytes and hash state so far so that it can be resumed.
    @discardableResult
    public func remove(_ key: Int) -> TransferOutcome? {
        if let set = segmentSets[key] { return removeSegmented(set) }
        guard let t = running.removeValue(forKey: key) else { return nil }
        gate.forget(t)
        // Removing a handle this session added cannot fail short of memory corruption; the
        // result is checked in `performTransfers`, where the engine can act on it.
        _ = curl_multi_remove_handle(multi, t.easy.raw)
        var outcome = t.outcome(curlCode: CURLE_OK, handingOverHeld: false)
        outcome.failure = .cancelled
        outcome.sha256 = nil
        return outcome
    }

    /// Running transfers whose response body began since the last call, with their response
    /// facts (the moment to remember resume validators).
    public func takeBodyStarts() -> [(key: Int, facts: ResponseFacts, restartedFromZero: Bool)] {
        var started: [(key: Int, facts: ResponseFacts, restartedFromZero: Bool)] = []
        for (key, t) in running where t.bodyJustBegan {
            t.bodyJustBegan = false
            started.append((key, t.facts, t.restartedFromZero))
            // First: a body that starts over forgets its kept ranges, and may then be split afresh.
            checkKeptRanges(t)
            if segmentSets[key] == nil, mayBeSplit(t) { splittable.insert(key) }
        }
        return started
    }

    /// Running transfers whose body reached a new checkpoint since the last call: how many bytes
    /// from the file's start are durable (see `TransferRequest.syncEvery`). One atomic load a
    /// call, and a walk over the transfers only after a checkpoint.
    public func takeCheckpoints() -> [(key: Int, durableBytes: Int64)] {
        guard checkpoints.take() else { return [] }
        var reached: [(key: Int, durableBytes: Int64)] = []
        for (key, t) in running {
            if let durable = t.newCheckpoint() { reached.append((key, durable)) }
        }
        return reached
    }

    /// Drives every transfer as far as it can go without blocking; returns those that ended.
    /// Throws when libcurl's multi interface fails (out of memory, internal error): the session
    /// is then unusable and the engine should stop.
    public func performTransfers() throws(TransferSessionError) -> [TransferOutcome] {
        gate.resumeIfDue()
        var stillRunning: Int32 = 0
        var code: CURLMcode
        repeat { code = curl_multi_perform(multi, &stillRunning) } while code == CURLM_CALL_MULTI_PERFORM
        try MultiCall.check("curl_multi_perform", code)
        var done: [TransferOutcome] = []
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let result = spoolfetch_msg_result(message)
            var context: UnsafeMutableRawPointer? = nil
            _ = spoolfetch_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &context)
            guard let context else { continue }
            let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
            let removed = curl_multi_remove_handle(multi, handle)
            gate.forget(transfer)
            if let set = segmentSets[transfer.key] {
                segmentEnded(set, transfer, code: result)
            } else {
                running.removeValue(forKey: transfer.key)
                done.append(transfer.outcome(curlCode: result))
            }
            try MultiCall.check("curl_multi_remove_handle", removed)
        }
        completeHashedSets()
        done += finishedOutcomes
        finishedOutcomes.removeAll()
        return done
    }

    /// The unchecked form of `performTransfers`, kept for callers not yet converted: a multi
    /// failure is dropped here (and shows up as transfers that never end).
    public func perform() -> [TransferOutcome] {
        (try? performTransfers()) ?? []
    }

    /// Sleeps until a socket is ready, libcurl's own timer fires, `waker` is called, or
    /// `timeoutMilliseconds` pass — whichever comes first. With no transfers and no timer, the
    /// engine passes a long timeout and the process makes no wake-ups.
    public func sleep(timeoutMilliseconds: Int32) throws(TransferSessionError) {
        var ready: Int32 = 0
        try MultiCall.check("curl_multi_poll", curl_multi_poll(multi, nil, 0, max(0, timeoutMilliseconds), &ready))
    }

    /// The unchecked form of `sleep`, kept for callers not yet converted.
    public func wait(timeoutMilliseconds: Int32) {
        try? sleep(timeoutMilliseconds: timeoutMilliseconds)
    }
}

/// Interrupts the session's `wait` from another thread (`curl_multi_wakeup` is thread-safe).
///
/// It holds the multi handle's pointer; the session invalidates it before freeing the handle, and
/// the lock makes a wake-up and that invalidation exclusive.
public final class TransferWaker: Sendable {
    private let state: LockedPointer

    init(multi: UnsafeMutableRawPointer) { state = LockedPointer(multi) }

    public func wake() {
        state.withPointer { if let m = $0 { _ = curl_multi_wakeup(m) } }
    }

    func invalidate() { state.clear() }
}

/// A pointer guarded by a mutex (only used off the hot path: wake-ups and teardown).
final class LockedPointer: @unchecked Sendable {
    private var pointer: UnsafeMutableRawPointer?
    private let lock = NSLock()
    init(_ p: UnsafeMutableRawPointer) { pointer = p }
    func withPointer(_ body: (UnsafeMutableRawPointer?) -> Void) { lock.lock(); defer { lock.unlock() }; body(pointer) }
    func clear() { lock.lock(); pointer = nil; lock.unlock() }
}
