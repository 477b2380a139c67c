internal import CCurl
import Foundation

/// The body of an upload: a file the caller opened (and keeps open until the outcome), sent
/// whole from byte 0 — HTTP has no standard way to resume an upload.
public struct UploadSource: Sendable {
    /// Open for reading; read with `pread`, so its offset is left alone.
    public var fd: Int32
    /// The file's size when it was opened: exactly this many bytes are sent.
    public var size: Int64
    public var method: String
    public var contentType: String

    /// How much of a response body is kept (`TransferOutcome.responseBody`).
    public static let responseLimit = 64 << 10

    public init(fd: Int32, size: Int64, method: String, contentType: String) {
        self.fd = fd
        self.size = size
        self.method = method
        self.contentType = contentType
    }
}

/// What an upload has read and sent so far, and the response it keeps. (Its digest is the
/// caller's, computed beside the transfer: hashing here would keep the engine's thread from
/// sending.)
struct UploadProgress {
    var sent: Int64 = 0
    var response: [UInt8] = []
}

extension TransferSession {
    /// The options an upload adds: the method, the body's size and read callbacks, its media
    /// type, and `Expect: 100-continue`, so that a server refusing the request (401, 403, 413)
    /// says so before the body is sent.
    func configureUpload(_ easy: EasyHandle, _ upload: UploadSource, context: UnsafeMutableRawPointer,
                         headers: inout [String]) throws(TransferSetupError) {
        if upload.method == "POST" {
            try easy.set(.post, true)
            try easy.set(.postFieldSize, upload.size)
        } else {
            try easy.set(.upload, true)
            try easy.set(.inFileSize, upload.size)
        }
        try easy.set(.uploadBufferSize, configuration.bufferSize)
        try easy.set(.readFunction, TransferCallbacks.read)
        try easy.set(.readData, context)
        try easy.setSeek(TransferCallbacks.seek)
        try easy.set(.seekData, context)
        headers.removeAll { $0.lowercased().hasPrefix("content-type:") || $0.lowercased().hasPrefix("expect:") }
        headers.append("Content-Type: \(upload.contentType)")
        // libcurl asks only for bodies over 1 MiB by itself; a refusal should cost no body at all.
        if upload.size > 0 { headers.append("Expect: 100-continue") }
    }
}

extension Transfer {
    /// Reads the next chunk of the upload's file into `buffer`; nil: abort (`abortReason` says why).
    func readUpload(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard let upload = request.upload else { return 0 }
        let wanted = Int(min(Int64(buffer.count), upload.size - sending.sent))
        guard wanted > 0 else {
            // The whole size is sent; a file that grew meanwhile is caught by the caller's check.
            return 0
        }
        let got = pread(upload.fd, buffer.baseAddress, wanted, off_t(sending.sent))
        if got < 0 {
            abortReason = .uploadRead(errno: errno)
            return nil
        }
        if got == 0 {
            abortReason = .uploadChanged("it ended at byte \(sending.sent) of \(upload.size)")
            return nil
        }
        sending.sent += Int64(got)
        return got
    }

    /// libcurl rewinds an upload's body to send it again (a redirect, an authentication round):
    /// only to byte 0.
    func rewindUpload(to offset: Int64) -> Bool {
        guard offset == 0 else { return false }
        sending.sent = 0
        return true
    }

    /// An upload's response body: its first `responseLimit` bytes are kept for the record.
    func keepResponse(_ bytes: UnsafeRawBufferPointer) {
        let room = UploadSource.responseLimit - sending.response.count
        if room > 0 { sending.response.append(contentsOf: bytes.prefix(room)) }
    }

    /// The outcome of an upload: success is a 2xx with the whole file sent; `bytesOnDisk` is how
    /// many bytes were sent (`sha256` stays nil: the caller hashes the file).
    func uploadOutcome(curlCode code: CURLcode) -> TransferOutcome {
        facts.finalURL = easy.string(CURLINFO_EFFECTIVE_URL)
        if facts.httpStatus == 0 { facts.httpStatus = easy.long(CURLINFO_RESPONSE_CODE) }
        if facts.retryAfter == nil {
            let ra = easy.offset(CURLINFO_RETRY_AFTER)
            if ra > 0 { facts.retryAfter = Double(ra) }
        }
        let size = request.upload?.size ?? 0
        var failure: TransferFailure? = nil
        if let reason = abortReason {
            failure = reason
        } else if code != CURLE_OK {
            failure = egressFailure(code) ?? .curl(code: Int(code.rawValue), text: curlText(code))
        } else if !(200...299).contains(facts.httpStatus) {
            failure = .httpStatus(facts.httpStatus)
        } else if sending.sent != size {
            // A 2xx before the whole body went (a server that answers early): not an upload of the file.
            failure = .curl(code: 55, text: "the server answered after \(sending.sent) of \(size) bytes were sent")
        }
        return TransferOutcome(key: key, failure: failure, facts: facts, bytesOnDisk: sending.sent,
                               bytesReceived: Int64(sending.response.count), sha256: nil, hashState: HashState(),
                               restartedFromZero: false, proxy: proxies.proxy(for: facts.finalURL ?? request.url),
                               evidence: ConnectionEvidence(responseStarted: responseStarted,
                                                            osErrno: Int32(truncatingIfNeeded: easy.long(CURLINFO_OS_ERRNO))),
                               unwritten: nil, responseBody: sending.response.isEmpty ? nil : sending.response)
    }
}

extension TransferCallbacks {
    static let read: spoolfetch_data_callback = { data, size, count, context in
        let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
        let total = size * count
        guard let data, total > 0 else { return 0 }
        let remaining = (transfer.request.upload?.size ?? 0) - transfer.sending.sent
        // `--max-rate` counts what is sent as it counts what is received.
        if remaining > 0, !transfer.gate.admit(transfer, bytes: Int(min(Int64(total), remaining))) {
            return spoolfetch_readfunc_pause()
        }
        guard let got = transfer.readUpload(into: UnsafeMutableRawBufferPointer(start: data, count: total)) else {
            return spoolfetch_readfunc_abort()
        }
        return got
    }

    static let seek: spoolfetch_seek_callback = { context, offset, origin in
        let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
        guard origin == SEEK_SET, transfer.rewindUpload(to: Int64(offset)) else { return spoolfetch_seekfunc_cantseek() }
        return spoolfetch_seekfunc_ok()
    }
}
