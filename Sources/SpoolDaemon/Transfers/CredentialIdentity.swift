import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SpoolRequest
import SpoolTransfer

/// The lines of a credentials file that are not headers but say who the item's requests are
/// from: AWS SigV4 keys (a private S3 bucket) and a TLS client certificate. Read and checked with
/// the file's header lines at each start (`PrivateFile.credentialHeaders`), carried to the
/// transfer among them — the item's machine passes the file's lines along without looking into
/// them — and taken out of the headers here, so none of them is ever sent as a header.
enum CredentialIdentity {
    static let sigV4 = "aws-sigv4"
    static let accessKeyId = "aws-access-key-id"
    static let secretAccessKey = "aws-secret-access-key"
    static let sessionToken = "aws-session-token"
    static let certificate = "client-certificate"
    static let key = "client-key"
    static let passphrase = "client-key-passphrase"

    /// Every identity line's lowercased name.
    static let names: Set<String> = [sigV4, accessKeyId, secretAccessKey, sessionToken, certificate, key, passphrase]

    /// Checks the identity lines of credentials file `name` (in `directory`) as a whole, and gives
    /// the certificate's and key's paths made absolute. The reasons name the file and the line's
    /// name, never a value (a value may be a secret).
    static func checked(_ lines: [RequestHeader], name: String, directory: String) throws(PrivateFile.Refused) -> [RequestHeader] {
        func refuse(_ why: String) -> PrivateFile.Refused { PrivateFile.Refused(description: "credentials '\(name)': \(why)") }
        var seen: [String: String] = [:]
        for line in lines {
            let lower = line.name.lowercased()
            guard names.contains(lower) else { continue }
            guard seen[lower] == nil else { throw refuse("\(line.name) is given twice") }
            guard !line.value.isEmpty else { throw refuse("\(line.name) is empty") }
            seen[lower] = line.value
        }
        let signing = [sigV4, accessKeyId, secretAccessKey, sessionToken].filter { seen[$0] != nil }
        if !signing.isEmpty {
            guard let provider = seen[sigV4] else {
                throw refuse("AWS keys without an AWS-SigV4 line (AWS-SigV4: aws:amz:REGION:s3)")
            }
            guard validProvider(provider) else {
                throw refuse("AWS-SigV4 must be aws:amz:REGION:SERVICE, such as aws:amz:eu-west-1:s3")
            }
            guard seen[accessKeyId] != nil, seen[secretAccessKey] != nil else {
                throw refuse("AWS-SigV4 needs both an AWS-Access-Key-Id and an AWS-Secret-Access-Key line")
            }
            if lines.contains(where: { $0.name.lowercased() == "authorization" }) {
                throw refuse("AWS-SigV4 signs with its own Authorization header; the file also has one")
            }
        }
        if (seen[key] != nil || seen[passphrase] != nil) && seen[certificate] == nil {
            throw refuse("Client-Key or Client-Key-Passphrase without a Client-Certificate line")
        }
        return try lines.map { (line: RequestHeader) throws(PrivateFile.Refused) -> RequestHeader in
            let lower = line.name.lowercased()
            guard lower == certificate || lower == key else { return line }
            let path = try resolve(line.value, in: directory, what: line.name, refuse: refuse)
            try checkFile(path, what: line.name, isKey: lower == key || seen[key] == nil, refuse: refuse)
            return RequestHeader(name: line.name, value: path)
        }
    }

    /// `aws:amz:REGION:SERVICE`: libcurl's four fields, each letters, digits and `-`.
    static func validProvider(_ text: String) -> Bool {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        return fields.count == 4 && fields.allSatisfy { field in
            !field.isEmpty && field.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
    }

    /// A certificate's or key's path: relative to the credentials folder and inside it (no `..`),
    /// or absolute (a file the daemon's administrator keeps elsewhere, such as `/etc/ssl/private`).
    private static func resolve(_ path: String, in directory: String, what: String,
                                refuse: (String) -> PrivateFile.Refused) throws(PrivateFile.Refused) -> String {
        if path.hasPrefix("/") { return path }
        guard !path.split(separator: "/").contains("..") else {
            throw refuse("\(what) must stay inside the credentials folder (no ..), or be an absolute path")
        }
        return (directory.hasSuffix("/") ? directory : directory + "/") + path
    }

    /// A certificate must be a regular file the daemon can read; a file holding the private key
    /// must, like the credentials file, be private to the daemon's user (`PrivateFile.read`).
    private static func checkFile(_ path: String, what: String, isKey: Bool,
                                  refuse: (String) -> PrivateFile.Refused) throws(PrivateFile.Refused) {
        if isKey {
            do throws(PrivateFile.Refused) { _ = try PrivateFile.read(path) } catch {
                throw refuse("\(what): \(error.description)")
            }
        } else if access(path, R_OK) != 0 {
            throw refuse("\(what): \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
    }

    /// The request's part of the item's credentials lines: the headers to send, the SigV4 signing
    /// and the client certificate.
    static func split(_ lines: [RequestHeader]) -> (headers: [RequestHeader], signing: AWSSigV4Signing?, identity: TLSClientIdentity?) {
        var values: [String: String] = [:]
        var headers: [RequestHeader] = []
        for line in lines {
            let lower = line.name.lowercased()
            if names.contains(lower) { values[lower] = line.value } else { headers.append(line) }
        }
        var signing: AWSSigV4Signing? = nil
        if let provider = values[sigV4], let id = values[accessKeyId], let secret = values[secretAccessKey] {
            signing = AWSSigV4Signing(provider: provider, accessKeyId: id, secretAccessKey: secret, sessionToken: values[sessionToken])
        }
        let identity = values[certificate].map { TLSClientIdentity(certificate: $0, key: values[key], passphrase: values[passphrase]) }
        return (headers, signing, identity)
    }
}
