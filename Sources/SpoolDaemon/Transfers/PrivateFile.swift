import Foundation
import SpoolCore
#if canImport(Glibc)
import Glibc
#endif
import SpoolRequest

/// Credentials by reference: files of secrets the daemon reads (a netrc file, header files in
/// `--credentials-dir`), so that request files — which the spool keeps for good in `done/` —
/// carry a name, not a secret. Each must be a regular file owned by the daemon's user with no
/// access for group or others (as ssh requires of a key): a secret anyone can read or replace
/// is refused rather than used.
enum PrivateFile {
    /// Most bytes read from a credentials file.
    static let maxBytes = 64 * 1024

    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// The file's bytes after the checks above (opened without following a symlink).
    static func read(_ path: String) throws(Refused) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let e = errno
            if e == ELOOP { throw Refused(description: "\(path) is a symlink") }
            throw Refused(description: "\(path) cannot be opened: \(String(cString: strerror(e)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Refused(description: "\(path): fstat: \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Refused(description: "\(path) is not a regular file") }
        guard info.st_uid == geteuid() else {
            throw Refused(description: "\(path) is owned by uid \(info.st_uid), not by the daemon's user (uid \(geteuid()))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw Refused(description: "\(path) is open to group or others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod 600 it")
        }
        guard info.st_size <= maxBytes else { throw Refused(description: "\(path) is larger than \(maxBytes) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Refused(description: "\(path) could not be read: \(String(cString: strerror(errno)))") }
            done += n
        }
        return bytes
    }

    /// Header names a credentials file may hold: the ones libcurl never sends to another host
    /// or port after a redirect (the cross-host rule of a request's own `header:` lines).
    static let credentialHeaders: Set<String> = ["authorization", "cookie"]

    /// The header lines of `--credentials-dir`/`name` (`#` comments and blank lines skipped), its
    /// identity lines among them (`CredentialIdentity`: checked, paths made absolute).
    static func credentialHeaders(directory: String?, name: String) throws(Refused) -> [RequestHeader] {
        guard let directory else {
            throw Refused(description: "the request names credentials '\(name)', but the daemon has no --credentials-dir")
        }
        let path = (directory.hasSuffix("/") ? directory : directory + "/") + name
        let text = String(decoding: try read(path), as: UTF8.self)
        var headers: [RequestHeader] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) || line.first == "#" { continue }
            switch RequestHeader.parse(String(line)) {
            case .failure(let rejection):
                throw Refused(description: "\(path) line \(number + 1): \(rejection.message)")
            case .success(let header):
                let lower = header.name.lowercased()
                guard credentialHeaders.contains(lower) || CredentialIdentity.names.contains(lower) else {
                    throw Refused(description: "\(path) line \(number + 1): \(header.name) is not allowed in a credentials file "
                                  + "(only Authorization and Cookie, which are never sent to another host after a redirect, "
                                  + "and the AWS-SigV4 and Client-Certificate lines)")
                }
                headers.append(header)
            }
        }
        guard !headers.isEmpty else { throw Refused(description: "\(path) holds no header line") }
        return try CredentialIdentity.checked(headers, name: name, directory: directory)
    }
}
