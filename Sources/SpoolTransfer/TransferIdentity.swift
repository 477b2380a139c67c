internal import CCurl
import Foundation

/// Signing every request of a transfer with AWS Signature Version 4 (a private S3 bucket): libcurl
/// signs each request at its turn (`CURLOPT_AWS_SIGV4`), so a segment, a retry and a resume each
/// carry a signature of their own, made when they are sent. The secret lives only in memory, for
/// the transfer; the daemon reads it from its credentials folder at each start.
public struct AWSSigV4Signing: Sendable, Hashable {
    /// libcurl's provider string, `aws:amz:REGION:SERVICE`.
    public var provider: String
    public var accessKeyId: String
    public var secretAccessKey: String
    /// Temporary credentials' token, sent (and signed) as `X-Amz-Security-Token`.
    public var sessionToken: String?

    public init(provider: String, accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.provider = provider
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The signing service (`s3` in `aws:amz:eu-west-1:s3`).
    var service: String { provider.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init) ?? "" }

    /// S3 wants the payload's hash in `x-amz-content-sha256` on every request (a request without
    /// it is refused, `SignatureDoesNotMatch` from moto, `InvalidRequest` from AWS). libcurl 7.88
    /// does not add it, but signs with the value of a header of that name when one is given. A
    /// download's GET has an empty body: its hash. An upload's body is read as it is sent, so its
    /// hash is not known when the request is signed: `UNSIGNED-PAYLOAD`, which S3 accepts.
    func contentHashHeader(upload: Bool) -> String? {
        guard service.lowercased() == "s3" else { return nil }
        return "x-amz-content-sha256: " + (upload ? "UNSIGNED-PAYLOAD" : Self.emptyBodySHA256)
    }

    static let emptyBodySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
}

/// A TLS client certificate (mTLS) for one transfer's connections. libcurl reuses a connection,
/// and resumes a TLS session, only under the same SSL configuration, and since 7.83.1 (the fix of
/// CVE-2022-27782) the client certificate's file name is part of what it compares (vtls.c,
/// `match_ssl_primary_config`: `clientcert`): a connection made with a certificate is not handed
/// to a transfer without it or with another, nor the other way round.
/// `ClientCertificateTests` checks this against nginx: two items with the certificate share a
/// connection, the item between them without one gets a connection of its own.
public struct TLSClientIdentity: Sendable, Hashable {
    /// PEM file of the certificate (and its chain), absolute.
    public var certificate: String
    /// PEM file of the private key, absolute; nil: it is in `certificate`'s file.
    public var key: String?
    /// The passphrase of an encrypted key.
    public var passphrase: String?

    public init(certificate: String, key: String? = nil, passphrase: String? = nil) {
        self.certificate = certificate
        self.key = key
        self.passphrase = passphrase
    }
}

extension TransferSession {
    /// Sets the request's own identity on its easy handle: SigV4 signing (and the headers it
    /// needs), a client certificate. Nothing when the request has none.
    func configureIdentity(_ easy: EasyHandle, _ request: TransferRequest, headers: inout [String]) throws(TransferSetupError) {
        if let signing = request.awsSigV4 {
            try easy.set(.awsSigV4, signing.provider)
            try easy.set(.userName, signing.accessKeyId)
            try easy.set(.password, signing.secretAccessKey)
            if let token = signing.sessionToken { headers.append("X-Amz-Security-Token: \(token)") }
            // libcurl signs every header of the list, and a server that answers `Expect:
            // 100-continue` itself (werkzeug under moto, some proxies) does not pass it on, so the
            // signature it checks would lack it. libcurl still adds its own, unsigned, to a body
            // over 1 MiB; a smaller one is sent without waiting for the server's go-ahead.
            if request.upload != nil { headers.removeAll { $0.lowercased().hasPrefix("expect:") } }
            if let line = signing.contentHashHeader(upload: request.upload != nil),
               !headers.contains(where: { $0.lowercased().hasPrefix("x-amz-content-sha256:") }) {
                headers.append(line)
            }
        }
        if let identity = request.clientIdentity {
            try easy.set(.sslCert, identity.certificate)
            try easy.set(.sslCertType, "PEM")
            if let key = identity.key {
                try easy.set(.sslKey, key)
                try easy.set(.sslKeyType, "PEM")
            }
            if let passphrase = identity.passphrase { try easy.set(.keyPassword, passphrase) }
        }
    }
}

extension Transfer {
    /// A transfer with a client certificate follows redirects on its own origin only: libcurl
    /// presents the certificate in every TLS handshake of the handle, a redirect's to another
    /// host included. Called after each header line; true (with `abortReason` set) when the
    /// response is a redirect to another scheme, host or port, so the header callback stops the
    /// transfer before libcurl follows it.
    func refusesRedirect() -> Bool {
        guard request.clientIdentity != nil, abortReason == nil, (300...399).contains(facts.httpStatus),
              let location = facts.location else { return false }
        let current = easy.string(CURLINFO_EFFECTIVE_URL) ?? request.url
        guard let from = URL(string: current), let to = URL(string: location, relativeTo: from)?.absoluteURL,
              let target = Origin(to) else { return false }
        guard Origin(from) != target else { return false }
        abortReason = .redirectRefused(to: target.text)
        return true
    }

    /// What a client-certificate failure looks like to libcurl and to a server, made into
    /// `clientCertificate` with what to do about it; nil when the failure is not one.
    /// - libcurl 58 (`CURLE_SSL_CERTPROBLEM`) with a certificate: the certificate or key could not
    ///   be loaded (a wrong passphrase, a key of another certificate, not PEM).
    /// - nginx's `ssl_verify_client on` completes the handshake and answers 400 with "No required
    ///   SSL certificate was sent" or "The SSL certificate error" as the page's title.
    /// - A server that refuses in the handshake (TLS 1.3 alert 116 "certificate required", "bad
    ///   certificate", "unknown ca"): libcurl 35 or 56 with OpenSSL's text.
    func clientCertificateFailure(_ failure: TransferFailure, errorBody: [UInt8]) -> TransferFailure? {
        let hasIdentity = request.clientIdentity != nil
        switch failure {
        case .curl(58, let text) where hasIdentity:
            return .clientCertificate("the client certificate or key could not be used (a wrong Client-Key-Passphrase, "
                                      + "a key of another certificate, or not PEM): \(text)")
        case .curl(35, let text), .curl(56, let text):
            if text.contains("alert certificate required") {
                return .clientCertificate("the server wants a client certificate and none was sent (\(text))")
            }
            if hasIdentity, text.contains("alert bad certificate") || text.contains("alert unknown ca")
                || text.contains("alert certificate unknown") {
                return .clientCertificate("the server refused the client certificate (\(text))")
            }
            return nil
        case .httpStatus(400):
            let page = String(decoding: errorBody.prefix(1024), as: UTF8.self)
            if page.contains("No required SSL certificate was sent") {
                return .clientCertificate("the server wants a client certificate and none was sent "
                                          + "(HTTP 400: No required SSL certificate was sent)")
            }
            if page.contains("The SSL certificate error") {
                return .clientCertificate("the server refused the client certificate (HTTP 400: The SSL certificate error)")
            }
            return nil
        default:
            return nil
        }
    }
}

/// A URL's scheme, host and port (the default port filled in): what a redirect may not change
/// for a transfer with a client certificate.
struct Origin: Hashable {
    let scheme: String
    let host: String
    let port: Int

    init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        self.scheme = scheme
        self.host = host
        port = url.port ?? (scheme == "https" ? 443 : 80)
    }

    var text: String { "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}
