internal import CCurl
internal import CLinux
import Crypto
import Foundation

/// One running download: its easy handle, its destination and running hash, and what the
/// response headers said. Lives exactly as long as its handle is in the multi handle; the
/// callbacks reach it through CURLOPT_WRITEDATA/HEADERDATA/PRIVATE (an unretained pointer, kept
/// valid because the session holds the transfer in `running` until it is removed).
final class Transfer {
    let key: Int
    let easy: EasyHandle
    let request: TransferRequest
    var facts = ResponseFacts()
    /// The running hash while it is computed here, on the receiving thread (small bodies).
    var hasher: SHA256
    /// Once a body is large, its writes and hash run on a thread of its own (see `BodyWriter`);
    /// `hasher` is then stale until `settleWriter` takes the state back.
    private var background: BodyWriter?
    /// A body that reaches this many bytes in one attempt is written and hashed on a thread of
    /// its own; below it (a 16 KiB body), a thread costs more than doing both here. Set from
    /// 4 MiB down to 128 KiB when only the hash moved: 1 MiB bodies hashed inline kept the engine
    /// thread a quarter of its time in SHA-256.
    static let backgroundThreshold: Int64 = 128 << 10
    /// Bytes of content in the destination file (prefix + written).
    var bytesOnDisk: Int64
    var bytesReceived: Int64 = 0
    /// Set by the write callback when it aborts the transfer; wins over curl's generic write error.
    var abortReason: TransferFailure?
    var restartedFromZero = false
    /// Whether any byte of any response arrived (header or body): the line between an outage and
    /// a failure from the server (see `TransferFailure.kind(given:)`).
    var responseStarted = false
    /// Set when the final response's body has just begun; the session reports it once.
    var bodyJustBegan = false
    /// Where this transfer stops writing (exclusive): the end of its range once its item is
    /// fetched in segments (`SegmentSet`); lowered when another connection takes over its tail.
    var stopAt: Int64 = .max
    /// The body reached `stopAt`: the transfer was cut there on purpose, and succeeded.
    var reachedStop = false
    /// Body bytes received past `stopAt` and dropped (the server sent them for nothing).
    var overshoot: Int64 = 0
    /// When the transfer was created (monotonic seconds): its rate, for work stealing.
    let startedAt = ProcessInfo.processInfo.systemUptime
    /// The last checkpoint the session reported (see `BodyWriter`, "Checkpoints"), and the
    /// session's flag a checkpoint raises.
    var checkpointReported: Int64 = 0
    let checkpoints: CheckpointFlag?

    /// The offset up to which the body is in the file (handed to the kernel), whoever writes it.
    var writtenOnDisk: Int64 { background?.writtenBytes ?? bytesOnDisk }

    /// The offset up to which the body is known durable: the last checkpoint, else where the
    /// request began (the caller synced what is before it).
    var durableOnDisk: Int64 {
        let base = restartedFromZero ? 0 : request.resumeFrom
        return max(base, background?.durableBytes ?? base)
    }

    /// Bytes made durable by a checkpoint since the session last asked; nil when none.
    func newCheckpoint() -> Int64? {
        guard let background else { return nil }
        let durable = background.durableBytes
        guard durable > checkpointReported, durable > request.resumeFrom || restartedFromZero else { return nil }
        checkpointReported = durable
        return durable
    }
    /// Whether the first body byte of the final response has been seen (decisions are made there).
    private(set) var bodyStarted = false
    /// Where the range not yet handed to writeback starts (see `BodyWriter.writebackChunk`).
    private var writebackStart: Int64
    /// A finished body's tail at least this large is handed to writeback at once (see
    /// `outcome`); a small file's is left to the batch's sync, which writes many of them together.
    static let writebackTail: Int64 = 256 << 10
    /// A small body's bytes, held to be written by the caller (see `ReceivedBody`); nil when
    /// the body is written as it arrives. They start at byte 0 (only a fresh body is held) and
    /// `heldReserved` bytes of `WriteBehind.budget` are taken for them.
    private var held: [UInt8]?
    private var heldReserved = 0
    /// An error response's body is read and dropped (keeps the connection reusable), up to a bound.
    private var discardingErrorBody = false
    private var discarded = 0
    /// The first bytes of that body, for the server's reason (`ServerErrorBody`).
    private var errorBody: [UInt8] = []

    /// Where libcurl takes its proxy from, to name it when a transfer fails.
    let proxies: ProxyEnvironment
    /// The session's `--max-rate` gate, asked before every body chunk.
    let gate: RateGate
    /// Paused by the gate (its write callback returned CURL_WRITEFUNC_PAUSE).
    var pausedForRate = false
    /// Its request's own rate bucket, while it is in the session (`RateGate.join`).
    var groupBucket: GroupBucket?
    /// An upload's progress: what was read from its file and sent so far (see `Transfer+Upload`).
    var sending = UploadProgress()
    /// The egress policy's check of every connection it opens (nil: nothing is denied).
    var egress: EgressGuard?
    /// The caller's space rules, asked before the body's first byte (see `BodyRoom`).
    let room: BodyRoom?
    /// A body of unknown length: what it may still write before the free space is read again.
    var unsized: UnsizedAllowance?

    init(key: Int, easy: EasyHandle, request: TransferRequest, proxies: ProxyEnvironment, gate: RateGate,
         checkpoints: CheckpointFlag? = nil, room: BodyRoom? = nil) {
        self.room = room
        self.checkpoints = checkpoints
        self.key = key
        self.proxies = proxies
        self.gate = gate
        self.easy = easy
        self.request = request
        self.hasher = request.prefixHash?.sha ?? SHA256()
        self.bytesOnDisk = request.resumeFrom
        self.writebackStart = request.resumeFrom
    }

    // MARK: Header callback

    /// One header line of any response, including redirects and interim responses.
    func header(_ line: UnsafeBufferPointer<UInt8>) {
        responseStarted = true
        facts.take(headerLine: line)
    }

    // MARK: Write callback

    /// Body bytes of the final response. Returns false to abort the transfer.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        responseStarted = true
        if request.upload != nil { keepResponse(bytes); return true }
        if !bodyStarted {
            bodyStarted = true
            if !beginBody() { return false }
            if !discardingErrorBody && !roomForBody() { return false }
            bodyJustBegan = !discardingErrorBody
            if !discardingErrorBody { holdIfSmall() }
        }
        if discardingErrorBody {
            if errorBody.count < ServerErrorBody.maxBytes { errorBody += bytes.prefix(ServerErrorBody.maxBytes - errorBody.count) }
            discarded += bytes.count
            return discarded <= 64 * 1024
        }
        var bytes = bytes
        if reachedStop {
            // Past the end of a closed range that was cut shorter (see `stopAt`): dropped.
            overshoot += Int64(bytes.count)
            return false
        }
        if Int64(bytes.count) >= stopAt - bytesOnDisk {
            reachedStop = true
            let keep = Int(max(0, stopAt - bytesOnDisk))
            overshoot += Int64(bytes.count - keep)
            bytes = UnsafeRawBufferPointer(rebasing: bytes[0..<keep])
        }
        // The end of the range the request asked for: the response ends here by itself (its
        // connection stays usable); any other stop cuts the response short.
        let naturalEnd = reachedStop && stopAt == request.rangeEnd && bytes.count + Int(bytesOnDisk) == Int(stopAt)
        bytesReceived += Int64(bytes.count)
        if let limit = request.maxBytes, bytesOnDisk + Int64(bytes.count) > limit {
            abortReason = .tooLarge(limit: limit)
            return false
        }
        if unsized != nil && !roomForUnsizedBody(Int64(bytes.count)) { return false }
        if held != nil {
            if held!.count + bytes.count <= heldReserved {
                held!.append(contentsOf: bytes)
                hasher.update(bufferPointer: bytes)
                bytesOnDisk += Int64(bytes.count)
                return !reachedStop || naturalEnd
            }
            // More than Content-Length said (a decoded body): write what is held, then as it comes.
            if let error = writeHeld() { abortReason = .write(errno: error); return false }
        }
        if let background {
            let error = background.append(bytes, at: bytesOnDisk)
            if error != 0 { abortReason = .write(errno: error); return false }
            bytesOnDisk += Int64(bytes.count)
            return !reachedStop || naturalEnd
        }
        let error = writeAll(request.destination, bytes, at: bytesOnDisk)
        if error != 0 { abortReason = .write(errno: error); return false }
        if !request.segment || request.verifying { hasher.update(bufferPointer: bytes) }
        bytesOnDisk += Int64(bytes.count)
        if bytesReceived >= Self.backgroundThreshold {
            // Everything up to here is written and hashed; from now on the writer thread does both.
            background = BodyWriter(fd: request.destination, sha: hasher, from: bytesOnDisk, writebackFrom: writebackStart,
                                    durableFrom: restartedFromZero ? 0 : request.resumeFrom, syncEvery: request.syncEvery,
                                    announce: checkpoints, hashing: !request.segment || request.verifying)
        }
        return !reachedStop || naturalEnd
    }

    /// Holds the body in memory instead of writing it (see `ReceivedBody`) when the caller
    /// allows it, the body starts at byte 0 and is announced small, and the budget has room.
    private func holdIfSmall() {
        guard request.writeBehind, request.resumeFrom == 0, bytesOnDisk == 0, facts.httpStatus == 200,
              let length = facts.contentLength, length > 0, length < WriteBehind.limit,
              WriteBehind.budget.reserve(Int(length)) else { return }
        held = []
        held!.reserveCapacity(Int(length))
        heldReserved = Int(length)
    }

    /// Writes the held bytes to the file (from byte 0) and stops holding. On failure the file and
    /// the hash start over from byte 0, so that they still agree; returns the errno.
    private func writeHeld() -> Int32? {
        guard let bytes = held else { return nil }
        held = nil
        WriteBehind.budget.release(heldReserved)
        heldReserved = 0
        let error = bytes.withUnsafeBytes { writeAll(request.destination, $0, at: 0) }
        if error == 0 { return nil }
        hasher = SHA256()
        bytesOnDisk = 0
        _ = ftruncate(request.destination, 0)
        return error
    }

    /// Decides what to do with the final response's body, once, before its first byte.
    private func beginBody() -> Bool {
        let status = facts.httpStatus != 0 ? facts.httpStatus : easy.long(CURLINFO_RESPONSE_CODE)
        if request.segment && status != 206 {
            // A segment splices only its own range of the one version: a 200 (Range ignored, or
            // If-Range said the resource changed) or an error ends it, and nothing is written.
            abortReason = status == 200 ? .rangeMismatch(asked: request.resumeFrom, got: nil) : .httpStatus(status)
            return false
        }
        switch status {
        case 206 where request.resumeFrom > 0 || request.rangeEnd != nil:
            if facts.rangeStart != request.resumeFrom {
                abortReason = .rangeMismatch(asked: request.resumeFrom, got: facts.rangeStart)
                return false
            }
            if let sent = request.ifRange, let got = facts.validatorContradicting(sent) {
                abortReason = .resourceChanged(sent: sent, got: got)
                return false
            }
            return true
        case 200:
            if request.resumeFrom > 0 {
                // The server ignored the range or the resource changed (If-Range): start over.
                restartedFromZero = true
                hasher = SHA256()
                bytesOnDisk = 0
                writebackStart = 0
                if ftruncate(request.destination, 0) != 0 { abortReason = .write(errno: errno); return false }
            }
            return true
        default:
            // Error (or unexpected) status: its body is not the resource. Keep none of it.
            discardingErrorBody = true
            return true
        }
    }

    /// libcurl's text for a failed transfer: the code's generic text, then the details of the
    /// error buffer ("SSL peer certificate or SSH remote key was not OK: SSL certificate problem:
    /// unable to get local issuer certificate"), then the proxy when one was in use.
    func curlText(_ code: CURLcode) -> String {
        var text = String(cString: curl_easy_strerror(code))
        if let detail = easy.errorDetail, detail != text { text += ": " + detail }
        if let proxy = proxies.proxy(for: easy.string(CURLINFO_EFFECTIVE_URL) ?? request.url) {
            // Resolving or connecting failed on the way to the proxy, not to the origin (libcurl
            // connects to the proxy only): say so, or the origin is reported down.
            if code == CURLE_COULDNT_RESOLVE_PROXY || code == CURLE_COULDNT_CONNECT {
                return TransferFailure.proxyUnreachablePrefix + "\(proxy) could not be reached: " + text
                    + " (the origin \(Self.connectTarget(of: request.url)) was not tried)"
            }
            text += " (through proxy \(proxy))"
        }
        return text
    }

    /// `host:port` of a URL, as a proxy's CONNECT names it.
    static func connectTarget(of url: String) -> String {
        guard let parsed = URLComponents(string: url), let host = parsed.host else { return url }
        let port = parsed.port ?? (parsed.scheme?.lowercased() == "https" ? 443 : 80)
        return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Waits for the writer thread (if any) to write and hash every byte handed over and takes
    /// its state back into `hasher`. Returns the errno of a failed write (the state then covers
    /// fewer bytes, and `bytesOnDisk` is cut to what it covers, so a resume stays consistent).
    private func settleWriter() -> Int32 {
        guard let background else { return 0 }
        let (sha, written, error, writebackFrom) = background.finish()
        self.background = nil
        hasher = sha
        writebackStart = max(writebackStart, writebackFrom)
        if error != 0 { bytesOnDisk = written }
        return error
    }

    deinit {
        // Removed without an outcome (session teardown): stop the thread before the caller
        // closes the file it writes.
        _ = settleWriter()
        WriteBehind.budget.release(heldReserved)
    }

    /// The outcome once libcurl reports the transfer done with `code`. A held body is handed
    /// over in `unwritten` only on success and when `handingOverHeld`; otherwise it is written
    /// now, so that a partial kept for a resume is on disk.
    func outcome(curlCode code: CURLcode, handingOverHeld: Bool = true) -> TransferOutcome {
        if request.upload != nil { return uploadOutcome(curlCode: code) }
        let writeError = settleWriter()
        facts.finalURL = easy.string(CURLINFO_EFFECTIVE_URL)
        if facts.httpStatus == 0 { facts.httpStatus = easy.long(CURLINFO_RESPONSE_CODE) }
        if facts.retryAfter == nil {
            let ra = easy.offset(CURLINFO_RETRY_AFTER)
            if ra > 0 { facts.retryAfter = Double(ra) }
        }
        var failure: TransferFailure? = nil
        if let reason = abortReason {
            failure = reason
        } else if writeError != 0 {
            failure = .write(errno: writeError)
        } else if code != CURLE_OK && !reachedStop {
            let connectStatus = easy.long(CURLINFO_HTTP_CONNECTCODE)
            if let denied = egressFailure(code) {
                failure = denied
            } else if code == CURLE_FILESIZE_EXCEEDED, let limit = request.maxBytes {
                failure = .tooLarge(limit: limit)
            } else if connectStatus >= 400, let proxy = proxies.proxy(for: easy.string(CURLINFO_EFFECTIVE_URL) ?? request.url) {
                // libcurl reports a refused tunnel as a receive error (56) with the proxy's
                // status beside it: classed as a transfer error it was retried as if the
                // origin had failed.
                failure = .proxyRefused(status: connectStatus, proxy: proxy, target: Self.connectTarget(of: request.url))
            } else {
                failure = .curl(code: Int(code.rawValue), text: curlText(code))
            }
        } else if discardingErrorBody || !(facts.httpStatus == 200 || facts.httpStatus == 206) {
            failure = .httpStatus(facts.httpStatus)
            facts.serverError = ServerErrorBody.reason(errorBody, hiding: [request.awsSigV4?.accessKeyId])
        } else if !bodyStarted {
            // An empty body: nothing was positioned or truncated yet.
            if facts.httpStatus == 200 && request.resumeFrom > 0 {
                restartedFromZero = true
                hasher = SHA256()
                bytesOnDisk = 0
                if ftruncate(request.destination, 0) != 0 { failure = .write(errno: errno) }
            }
        }
        if failure == nil, bytesOnDisk - writebackStart >= Self.writebackTail {
            // The body's last pages go to writeback now rather than at the batch's sync: a file
            // of a few MiB is then mostly on disk by the time its batch is synced, while the
            // next bodies arrive.
            _ = spoolfetch_start_writeback(request.destination, writebackStart, bytesOnDisk - writebackStart)
            writebackStart = bytesOnDisk
        }
        if failure == nil, !reachedStop, facts.httpStatus == 206, let end = request.rangeEnd, bytesOnDisk < (facts.rangeTotal ?? .max) {
            // A closed range that ended where it was asked to, but this transfer was to go on
            // (its stop was lifted): the body is not whole.
            failure = .curl(code: 18, text: "the range ended at \(bytesOnDisk) (asked up to \(end)), before the body's end")
        }
        if failure == nil, !reachedStop, let expected = facts.contentLength {
            // curl already checks Content-Length; this guards the 206 arithmetic too.
            let start = facts.httpStatus == 206 ? (facts.rangeStart ?? 0) : 0
            if start + expected != bytesOnDisk {
                failure = .curl(code: 18, text: "body ended at \(bytesOnDisk) bytes, expected \(start + expected)")
            }
        }
        if let failed = failure, let mapped = clientCertificateFailure(failed, errorBody: errorBody) { failure = mapped }
        var unwritten: ReceivedBody? = nil
        if let bytes = held {
            if failure == nil && handingOverHeld {
                unwritten = ReceivedBody(offset: 0, bytes: bytes, reserved: heldReserved)
                held = nil
                heldReserved = 0
            } else if let error = writeHeld(), failure == nil {
                failure = .write(errno: error)
            }
        }
        let digest = failure == nil ? Hex.encode(hasher.finalize()) : nil
        let proxy = proxies.proxy(for: facts.finalURL ?? request.url)
        return TransferOutcome(key: key, failure: failure, facts: facts, bytesOnDisk: bytesOnDisk,
                               bytesReceived: bytesReceived, sha256: digest, hashState: HashState(hasher),
                               restartedFromZero: restartedFromZero, proxy: proxy,
                               evidence: ConnectionEvidence(responseStarted: responseStarted,
                                                            osErrno: Int32(truncatingIfNeeded: easy.long(CURLINFO_OS_ERRNO))),
                               unwritten: unwritten)
    }
}
