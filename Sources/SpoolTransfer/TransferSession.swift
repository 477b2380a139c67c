internal import CCurl
import Foundation

/// The one shared transfer session: a single `CURLM` multi handle that runs every download.
///
/// Not thread-safe by design: one engine thread owns it, calls `start`, `remove`, `perform` and
/// `wait`. Other threads may only use its `waker`, to interrupt `wait`.
public final class TransferSession {
    private let multi: UnsafeMutableRawPointer
    private let configuration: TransferConfiguration
    private var running: [Int: Transfer] = [:]
    /// Wakes `wait` from any thread.
    public let waker: TransferWaker

    /// libcurl's global init is not thread-safe; do it once, before any other thread exists.
    private static let globalInit: Void = {
        signal(SIGPIPE, SIG_IGN)
        curl_global_init(Int(CURL_GLOBAL_ALL))
    }()

    public init(configuration: TransferConfiguration) throws(TransferSetupError) {
        _ = Self.globalInit
        guard let m = curl_multi_init() else { throw .init(option: "curl_multi_init", code: -1) }
        multi = m
        self.configuration = configuration
        waker = TransferWaker(multi: m)
        if configuration.maxConnections > 0 {
            _ = spoolfetch_multi_setopt_long(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections)
            // Keep enough idle connections for reuse across items.
            _ = spoolfetch_multi_setopt_long(m, CURLMOPT_MAXCONNECTS, configuration.maxConnections)
        }
    }

    deinit {
        for (_, t) in running { curl_multi_remove_handle(multi, t.easy.raw) }
        running.removeAll()
        waker.invalidate()
        curl_multi_cleanup(multi)
    }

    public var runningCount: Int { running.count }

    /// Bytes on disk and the expected total of a running transfer (for status and progress).
    public func progress(of key: Int) -> (bytes: Int64, total: Int64?)? {
        guard let t = running[key] else { return nil }
        let total: Int64? = t.facts.rangeTotal ?? t.facts.contentLength.map { $0 + (t.facts.rangeStart ?? 0) }
        return (t.bytesOnDisk, total)
    }

    /// Adds a download to the session. It runs during later `perform` calls.
    public func start(key: Int, request: TransferRequest, maxRecvSpeed: Int64 = 0) throws(TransferSetupError) {
        // A fresh handle per transfer: the connection pool and DNS cache live in the multi handle
        // anyway, and libcurl 7.88 refuses CURLOPT_BUFFERSIZE on a reset handle whose last
        // transfer failed in some ways (its receive buffer is still allocated).
        let easy = try EasyHandle()
        let transfer = Transfer(key: key, easy: easy, request: request)
        try configure(easy, for: transfer, maxRecvSpeed: maxRecvSpeed)
        running[key] = transfer
        let code = curl_multi_add_handle(multi, easy.raw)
        if code != CURLM_OK {
            running.removeValue(forKey: key)
            throw TransferSetupError(option: "curl_multi_add_handle", code: Int(code.rawValue))
        }
    }

    /// Changes the receive-rate cap of a running transfer (for the daemon-wide `--max-rate`).
    public func setMaxRecvSpeed(_ key: Int, _ bytesPerSecond: Int64) {
        guard let t = running[key] else { return }
        _ = spoolfetch_easy_setopt_off(t.easy.raw, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(bytesPerSecond))
    }

    /// Removes a running transfer (pause, cancel, shutdown). Returns its outcome as `.cancelled`,
    /// with the bytes and hash state so far so that it can be resumed.
    @discardableResult
    public func remove(_ key: Int) -> TransferOutcome? {
        guard let t = running.removeValue(forKey: key) else { return nil }
        curl_multi_remove_handle(multi, t.easy.raw)
        var outcome = t.outcome(curlCode: CURLE_OK)
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
        }
        return started
    }

    /// Drives every transfer as far as it can go without blocking; returns those that ended.
    public func perform() -> [TransferOutcome] {
        var stillRunning: Int32 = 0
        var code: CURLMcode
        repeat { code = curl_multi_perform(multi, &stillRunning) } while code == CURLM_CALL_MULTI_PERFORM
        var done: [TransferOutcome] = []
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let result = spoolfetch_msg_result(message)
            var context: UnsafeMutableRawPointer? = nil
            _ = spoolfetch_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &context)
            guard let context else { continue }
            let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
            curl_multi_remove_handle(multi, handle)
            running.removeValue(forKey: transfer.key)
            done.append(transfer.outcome(curlCode: result))
        }
        return done
    }

    /// Sleeps until a socket is ready, libcurl's own timer fires, `waker` is called, or
    /// `timeoutMilliseconds` pass — whichever comes first. With no transfers and no timer, the
    /// engine passes a long timeout and the process makes no wake-ups.
    public func wait(timeoutMilliseconds: Int32) {
        var ready: Int32 = 0
        _ = curl_multi_poll(multi, nil, 0, max(0, timeoutMilliseconds), &ready)
    }


    private func configure(_ easy: EasyHandle, for transfer: Transfer, maxRecvSpeed: Int64) throws(TransferSetupError) {
        let request = transfer.request
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        try easy.set(CURLOPT_URL, request.url, name: "CURLOPT_URL")
        try easy.set(CURLOPT_NOSIGNAL, 1, name: "CURLOPT_NOSIGNAL")
        // Only http and https, also for redirects (no file://, ftp://, gopher://, dict:// …).
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https", name: "CURLOPT_PROTOCOLS_STR")
        try easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https", name: "CURLOPT_REDIR_PROTOCOLS_STR")
        try easy.set(CURLOPT_FOLLOWLOCATION, 1, name: "CURLOPT_FOLLOWLOCATION")
        try easy.set(CURLOPT_MAXREDIRS, configuration.maxRedirects, name: "CURLOPT_MAXREDIRS")
        // Credentials never follow a redirect to another host (libcurl's default, stated here).
        try easy.set(CURLOPT_UNRESTRICTED_AUTH, 0, name: "CURLOPT_UNRESTRICTED_AUTH")
        try easy.set(CURLOPT_SSL_VERIFYPEER, 1, name: "CURLOPT_SSL_VERIFYPEER")
        try easy.set(CURLOPT_SSL_VERIFYHOST, 2, name: "CURLOPT_SSL_VERIFYHOST")
        if let ca = configuration.caFile {
            try easy.set(CURLOPT_CAINFO, ca, name: "CURLOPT_CAINFO")
            // Keep the system's store as well: --ca-file adds trust, it does not replace it.
            try easy.set(CURLOPT_CAPATH, configuration.caPath ?? "/etc/ssl/certs", name: "CURLOPT_CAPATH")
        } else if let path = configuration.caPath {
            try easy.set(CURLOPT_CAPATH, path, name: "CURLOPT_CAPATH")
        }
        try easy.set(CURLOPT_BUFFERSIZE, configuration.bufferSize, name: "CURLOPT_BUFFERSIZE")
        try easy.set(CURLOPT_CONNECTTIMEOUT, configuration.connectTimeout, name: "CURLOPT_CONNECTTIMEOUT")
        // A stall: less than 1 byte/s for stallTimeout seconds.
        try easy.set(CURLOPT_LOW_SPEED_LIMIT, 1, name: "CURLOPT_LOW_SPEED_LIMIT")
        try easy.set(CURLOPT_LOW_SPEED_TIME, configuration.stallTimeout, name: "CURLOPT_LOW_SPEED_TIME")
        try easy.set(CURLOPT_USERAGENT, configuration.userAgent, name: "CURLOPT_USERAGENT")
        // HTTP/2 multiplexing over https needs PIPEWAIT. Never for plain http: there it makes a
        // transfer wait for a busy HTTP/1.1 connection instead of opening its own (one slow
        // response then holds up every other item of the host).
        if request.url.lowercased().hasPrefix("https:") {
            try easy.set(CURLOPT_PIPEWAIT, 1, name: "CURLOPT_PIPEWAIT")
        }
        try easy.set(CURLOPT_ACCEPT_ENCODING, "identity", name: "CURLOPT_ACCEPT_ENCODING")
        if let limit = request.maxBytes {
            try easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: limit, name: "CURLOPT_MAXFILESIZE_LARGE")
        }
        if maxRecvSpeed > 0 {
            try easy.set(CURLOPT_MAX_RECV_SPEED_LARGE, offset: maxRecvSpeed, name: "CURLOPT_MAX_RECV_SPEED_LARGE")
        }
        var headers = request.headers
        if request.resumeFrom > 0 {
            try easy.set(CURLOPT_RANGE, "\(request.resumeFrom)-", name: "CURLOPT_RANGE")
            if let validator = request.ifRange { headers.append("If-Range: \(validator)") }
        }
        if !headers.isEmpty { try easy.setHeaders(headers) }
        try easy.set(CURLOPT_WRITEFUNCTION, callback: TransferCallbacks.write, name: "CURLOPT_WRITEFUNCTION")
        try easy.set(CURLOPT_WRITEDATA, pointer: context, name: "CURLOPT_WRITEDATA")
        try easy.set(CURLOPT_HEADERFUNCTION, callback: TransferCallbacks.header, name: "CURLOPT_HEADERFUNCTION")
        try easy.set(CURLOPT_HEADERDATA, pointer: context, name: "CURLOPT_HEADERDATA")
        try easy.set(CURLOPT_PRIVATE, pointer: context, name: "CURLOPT_PRIVATE")
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
