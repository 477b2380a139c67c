internal import CCurl
import Foundation

/// Owner of one `CURL *` easy handle, for one transfer. Freed in `deinit`.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    /// The header list installed with CURLOPT_HTTPHEADER; libcurl does not copy it, so it lives here.
    private var headerList: UnsafeMutablePointer<curl_slist>?

    init() throws(TransferSetupError) {
        guard let h = curl_easy_init() else { throw .init(option: "curl_easy_init", code: -1) }
        raw = h
    }

    deinit {
        curl_easy_cleanup(raw)
        if let list = headerList { curl_slist_free_all(list) }
    }

    func set(_ option: CURLoption, _ value: Int, name: String) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_long(raw, option, value), name)
    }
    func set(_ option: CURLoption, offset value: Int64, name: String) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_off(raw, option, curl_off_t(value)), name)
    }
    /// libcurl copies string options, so the Swift string's storage need not outlive the call.
    func set(_ option: CURLoption, _ value: String, name: String) throws(TransferSetupError) {
        let code = value.withCString { spoolfetch_easy_setopt_string(raw, option, $0) }
        try check(code, name)
    }
    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?, name: String) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_pointer(raw, option, pointer), name)
    }
    func set(_ option: CURLoption, callback: spoolfetch_data_callback, name: String) throws(TransferSetupError) {
        try check(spoolfetch_easy_setopt_data_callback(raw, option, callback), name)
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

/// A libcurl option could not be set: a bug or a libcurl built without a needed feature.
public struct TransferSetupError: Error, Sendable, CustomStringConvertible {
    public let option: String
    public let code: Int
    public var description: String {
        let text = code >= 0 ? String(cString: curl_easy_strerror(CURLcode(UInt32(code)))) : "allocation failed"
        return "libcurl refused \(option): \(text) (code \(code))"
    }
}
