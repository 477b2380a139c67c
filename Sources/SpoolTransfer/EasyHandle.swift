internal import CCurl
import Foundation

/// Owner of one `CURL *` easy handle, for one transfer, and of its error buffer. Freed in `deinit`.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    /// The header list installed with CURLOPT_HTTPHEADER; libcurl does not copy it, so it lives here.
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// CURLOPT_ERRORBUFFER: libcurl writes the failure's details here ("SSL certificate problem:
    /// unable to get local issuer certificate" where `curl_easy_strerror` only has the code's name).
    private let errorBuffer: UnsafeMutablePointer<CChar>

    init() throws(TransferSetupError) {
        guard let h = curl_easy_init() else { throw .init(option: "curl_easy_init", code: -1) }
        raw = h
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        try set(.errorBuffer, UnsafeMutableRawPointer(errorBuffer))
    }

    deinit {
        curl_easy_cleanup(raw)
        if let list = headerList { curl_slist_free_all(list) }
        errorBuffer.deallocate()
    }

    /// What libcurl wrote into the error buffer for the last failure; nil when it wrote nothing.
    var errorDetail: String? {
        let text = String(cString: errorBuffer).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    func set(_ option: CurlOption<CurlLong>, _ value: Int) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_long(raw, option.option, value), option.name)
    }
    func set(_ option: CurlOption<CurlLong>, _ value: Bool) throws(TransferSetupError) {
        try set(option, value ? 1 : 0)
    }
    func set(_ option: CurlOption<CurlOffset>, _ value: Int64) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_off(raw, option.option, curl_off_t(value)), option.name)
    }
    /// libcurl copies string options, so the Swift string's storage need not outlive the call.
    func set(_ option: CurlOption<CurlString>, _ value: String) throws(TransferSetupError) {
        let code = value.withCString { spoolfetch_easy_setopt_string(raw, option.option, $0) }
        try check(code, option.name)
    }
    /// Sets a string option to none (NULL), undoing a default libcurl was built with.
    func unset(_ option: CurlOption<CurlString>) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_string(raw, option.option, nil), option.name)
    }
    func set(_ option: CurlOption<CurlPointer>, _ value: UnsafeMutableRawPointer?) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_pointer(raw, option.option, value), option.name)
    }
    func set(_ option: CurlOption<CurlDataCallback>, _ value: spoolfetch_data_callback) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_data_callback(raw, option.option, value), option.name)
    }

    func setSeek(_ value: spoolfetch_seek_callback) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_seek_callback(raw, value), "CURLOPT_SEEKFUNCTION")
    }

    func setOpenSocket(_ value: spoolfetch_opensocket_callback) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_opensocket_callback(raw, value), "CURLOPT_OPENSOCKETFUNCTION")
    }

    func setHeaders(_ lines: [String]) throws(TransferSetupError) {
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for line in lines {
            guard let appended = curl_slist_append(list, line) else {
                if let l = list { curl_slist_free_all(l) }
                throw .init(option: "curl_slist_append", code: -1)
            }
            list = appended
        }
        if let old = headerList { curl_slist_free_all(old) }
        headerList = list
        try check(spoolfetch_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, list), "CURLOPT_HTTPHEADER")
    }

    func long(_ info: CURLINFO) -> Int {
        var v: Int = 0
        _ = spoolfetch_easy_getinfo_long(raw, info, &v)
        return v
    }
    func offset(_ info: CURLINFO) -> Int64 {
        var v: curl_off_t = 0
        _ = spoolfetch_easy_getinfo_off(raw, info, &v)
        return Int64(v)
    }
    func string(_ info: CURLINFO) -> String? {
        var p: UnsafeMutablePointer<CChar>? = nil
        guard spoolfetch_easy_getinfo_string(raw, info, &p) == CURLE_OK, let s = p else { return nil }
        return String(cString: s)
    }

    private func check(_ code: CURLcode, _ name: String) throws(TransferSetupError) {
        if code != CURLE_OK { throw .init(option: name, code: Int(code.rawValue)) }
    }
}

/// A libcurl option could not be set, or libcurl could not start: a bug, a libcurl built without
/// a needed feature, or no memory.
public struct TransferSetupError: Error, Sendable, CustomStringConvertible {
    /// The option or call that failed (`CURLOPT_BUFFERSIZE`, `curl_global_init`, …).
    public let option: String
    /// libcurl's result code (`CURLcode`, or `CURLMcode` for multi options); -1: allocation failed.
    public let code: Int
    /// libcurl's text for the code.
    public let text: String

    /// A failed easy-interface call (`CURLcode`).
    public init(option: String, code: Int) {
        self.option = option
        self.code = code
        text = code >= 0 ? String(cString: curl_easy_strerror(CURLcode(UInt32(code)))) : "allocation failed"
    }

    /// A failed multi-interface call, with the text `curl_multi_strerror` gave.
    init(_ error: TransferSessionError) {
        option = error.call
        code = error.code
        text = error.text
    }

    public var description: String { "libcurl refused \(option): \(text) (code \(code))" }
}
