internal import CCurl

/// The kinds of value a libcurl easy option takes. Each is a type that is never instantiated:
/// it only marks `CurlOption` so that `EasyHandle.set` accepts the right Swift value for it.
enum CurlLong {}
enum CurlOffset {}
enum CurlString {}
enum CurlPointer {}
enum CurlDataCallback {}

/// One libcurl easy option: its number, its name (for error messages) and, in `Kind`, the kind of
/// value it takes. `EasyHandle.set(.maxRedirects, "20")` does not compile; neither does passing
/// a name beside an option: each option says its own.
struct CurlOption<Kind>: Sendable {
    let rawValue: UInt32
    let name: String

    init(_ option: CURLoption, _ name: String) {
        rawValue = option.rawValue
        self.name = name
    }

    var option: CURLoption { CURLoption(rawValue: rawValue) }
}

extension CurlOption where Kind == CurlLong {
    static var noSignal: Self { .init(CURLOPT_NOSIGNAL, "CURLOPT_NOSIGNAL") }
    static var followLocation: Self { .init(CURLOPT_FOLLOWLOCATION, "CURLOPT_FOLLOWLOCATION") }
    static var maxRedirects: Self { .init(CURLOPT_MAXREDIRS, "CURLOPT_MAXREDIRS") }
    static var unrestrictedAuth: Self { .init(CURLOPT_UNRESTRICTED_AUTH, "CURLOPT_UNRESTRICTED_AUTH") }
    static var sslVerifyPeer: Self { .init(CURLOPT_SSL_VERIFYPEER, "CURLOPT_SSL_VERIFYPEER") }
    static var sslVerifyHost: Self { .init(CURLOPT_SSL_VERIFYHOST, "CURLOPT_SSL_VERIFYHOST") }
    static var bufferSize: Self { .init(CURLOPT_BUFFERSIZE, "CURLOPT_BUFFERSIZE") }
    static var connectTimeout: Self { .init(CURLOPT_CONNECTTIMEOUT, "CURLOPT_CONNECTTIMEOUT") }
    static var lowSpeedLimit: Self { .init(CURLOPT_LOW_SPEED_LIMIT, "CURLOPT_LOW_SPEED_LIMIT") }
    static var lowSpeedTime: Self { .init(CURLOPT_LOW_SPEED_TIME, "CURLOPT_LOW_SPEED_TIME") }
    static var pipeWait: Self { .init(CURLOPT_PIPEWAIT, "CURLOPT_PIPEWAIT") }
    static var freshConnect: Self { .init(CURLOPT_FRESH_CONNECT, "CURLOPT_FRESH_CONNECT") }
    static var forbidReuse: Self { .init(CURLOPT_FORBID_REUSE, "CURLOPT_FORBID_REUSE") }
    static var httpVersion: Self { .init(CURLOPT_HTTP_VERSION, "CURLOPT_HTTP_VERSION") }
    static var sslVersion: Self { .init(CURLOPT_SSLVERSION, "CURLOPT_SSLVERSION") }
    static var caCacheTimeout: Self { .init(CURLOPT_CA_CACHE_TIMEOUT, "CURLOPT_CA_CACHE_TIMEOUT") }
    static var netrc: Self { .init(CURLOPT_NETRC, "CURLOPT_NETRC") }
    static var upload: Self { .init(CURLOPT_UPLOAD, "CURLOPT_UPLOAD") }
    static var post: Self { .init(CURLOPT_POST, "CURLOPT_POST") }
    static var uploadBufferSize: Self { .init(CURLOPT_UPLOAD_BUFFERSIZE, "CURLOPT_UPLOAD_BUFFERSIZE") }
    static var expect100TimeoutMs: Self { .init(CURLOPT_EXPECT_100_TIMEOUT_MS, "CURLOPT_EXPECT_100_TIMEOUT_MS") }
}

extension CurlOption where Kind == CurlOffset {
    static var maxFileSize: Self { .init(CURLOPT_MAXFILESIZE_LARGE, "CURLOPT_MAXFILESIZE_LARGE") }
    static var maxRecvSpeed: Self { .init(CURLOPT_MAX_RECV_SPEED_LARGE, "CURLOPT_MAX_RECV_SPEED_LARGE") }
    static var inFileSize: Self { .init(CURLOPT_INFILESIZE_LARGE, "CURLOPT_INFILESIZE_LARGE") }
    static var postFieldSize: Self { .init(CURLOPT_POSTFIELDSIZE_LARGE, "CURLOPT_POSTFIELDSIZE_LARGE") }
}

extension CurlOption where Kind == CurlString {
    static var url: Self { .init(CURLOPT_URL, "CURLOPT_URL") }
    static var protocols: Self { .init(CURLOPT_PROTOCOLS_STR, "CURLOPT_PROTOCOLS_STR") }
    static var redirectProtocols: Self { .init(CURLOPT_REDIR_PROTOCOLS_STR, "CURLOPT_REDIR_PROTOCOLS_STR") }
    static var caInfo: Self { .init(CURLOPT_CAINFO, "CURLOPT_CAINFO") }
    static var caPath: Self { .init(CURLOPT_CAPATH, "CURLOPT_CAPATH") }
    static var userAgent: Self { .init(CURLOPT_USERAGENT, "CURLOPT_USERAGENT") }
    static var acceptEncoding: Self { .init(CURLOPT_ACCEPT_ENCODING, "CURLOPT_ACCEPT_ENCODING") }
    static var range: Self { .init(CURLOPT_RANGE, "CURLOPT_RANGE") }
    static var netrcFile: Self { .init(CURLOPT_NETRC_FILE, "CURLOPT_NETRC_FILE") }
    // A request's own identity (`TransferIdentity.swift`): AWS SigV4 signing and a TLS client certificate.
    static var awsSigV4: Self { .init(CURLOPT_AWS_SIGV4, "CURLOPT_AWS_SIGV4") }
    static var userName: Self { .init(CURLOPT_USERNAME, "CURLOPT_USERNAME") }
    static var password: Self { .init(CURLOPT_PASSWORD, "CURLOPT_PASSWORD") }
    static var sslCert: Self { .init(CURLOPT_SSLCERT, "CURLOPT_SSLCERT") }
    static var sslCertType: Self { .init(CURLOPT_SSLCERTTYPE, "CURLOPT_SSLCERTTYPE") }
    static var sslKey: Self { .init(CURLOPT_SSLKEY, "CURLOPT_SSLKEY") }
    static var sslKeyType: Self { .init(CURLOPT_SSLKEYTYPE, "CURLOPT_SSLKEYTYPE") }
    static var keyPassword: Self { .init(CURLOPT_KEYPASSWD, "CURLOPT_KEYPASSWD") }
}

extension CurlOption where Kind == CurlPointer {
    static var writeData: Self { .init(CURLOPT_WRITEDATA, "CURLOPT_WRITEDATA") }
    static var headerData: Self { .init(CURLOPT_HEADERDATA, "CURLOPT_HEADERDATA") }
    static var privateData: Self { .init(CURLOPT_PRIVATE, "CURLOPT_PRIVATE") }
    static var readData: Self { .init(CURLOPT_READDATA, "CURLOPT_READDATA") }
    static var seekData: Self { .init(CURLOPT_SEEKDATA, "CURLOPT_SEEKDATA") }
    static var openSocketData: Self { .init(CURLOPT_OPENSOCKETDATA, "CURLOPT_OPENSOCKETDATA") }
    /// A buffer of at least CURL_ERROR_SIZE bytes that libcurl fills with the failure's details.
    static var errorBuffer: Self { .init(CURLOPT_ERRORBUFFER, "CURLOPT_ERRORBUFFER") }
}

extension CurlOption where Kind == CurlDataCallback {
    static var writeFunction: Self { .init(CURLOPT_WRITEFUNCTION, "CURLOPT_WRITEFUNCTION") }
    static var headerFunction: Self { .init(CURLOPT_HEADERFUNCTION, "CURLOPT_HEADERFUNCTION") }
    static var readFunction: Self { .init(CURLOPT_READFUNCTION, "CURLOPT_READFUNCTION") }
}
