internal import CCurl

/// A call of libcurl's multi interface failed (`curl_multi_perform`, `curl_multi_poll`,
/// `curl_multi_remove_handle`, `curl_multi_setopt`): out of memory, a bad handle, or a poll that
/// cannot be recovered. The session cannot be trusted afterwards.
public struct TransferSessionError: Error, Sendable, CustomStringConvertible {
    /// The libcurl call that failed.
    public let call: String
    /// Its `CURLMcode`.
    public let code: Int
    /// libcurl's text for the code (`curl_multi_strerror`).
    public let text: String

    public var description: String { "\(call) failed: \(text) (CURLMcode \(code))" }
}

/// Checks `CURLMcode` results.
enum MultiCall {
    static func check(_ call: String, _ code: CURLMcode) throws(TransferSessionError) {
        guard code != CURLM_OK else { return }
        throw TransferSessionError(call: call, code: Int(code.rawValue),
                                   text: String(cString: curl_multi_strerror(code)))
    }
}
