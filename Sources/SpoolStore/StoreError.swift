import Foundation

/// A file-system operation on the spool failed. Carries the syscall, the path and errno, so an
/// operator can act on it ("No space left on device", "Permission denied" …).
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public let call: String
    public let path: String
    public let errno: Int32
    /// What the errno alone does not say (a copy that does not match its marker, a filesystem
    /// without the needed rename), when there is something to add.
    public let detail: String?

    public init(_ call: String, _ path: String, errno: Int32 = Glibc.errno, detail: String? = nil) {
        self.call = call
        self.path = path
        self.errno = errno
        self.detail = detail
    }

    public var description: String {
        "\(call) \(path): \(String(cString: strerror(errno))) (errno \(errno))" + (detail.map { ": " + $0 } ?? "")
    }

    /// Another worker took the request over while this one stalled past its lease (see
    /// `SpoolStore.confirmHeld`): this worker must drop it, committing nothing of it.
    public static func fenced(_ path: String) -> StoreError {
        StoreError("fence", path, errno: ESTALE,
                   detail: "another worker took this request over while this worker was stalled past its lease")
    }

    public var isFenced: Bool { call == "fence" }

    public var isDiskFull: Bool { errno == ENOSPC || errno == EDQUOT }

    /// Trying again cannot help: the filesystem or the permissions refuse the operation itself,
    /// not for now. The engine fails the item (or reports the request) at once instead of retrying
    /// every few seconds forever. The list:
    /// EXDEV (a cross-filesystem step still refused after the copy fallback), EINVAL, ENOSYS,
    /// EOPNOTSUPP/ENOTSUP (the filesystem lacks the call), EACCES, EPERM (permissions, protected
    /// hard links), EROFS (read-only), ENAMETOOLONG, ELOOP, ENOTDIR, EISDIR (a path that can never
    /// work). Disk full (ENOSPC, EDQUOT), I/O errors (EIO), ENOENT, EEXIST and the rest are not.
    public var isPermanent: Bool { isFenced || Self.permanentErrnos.contains(errno) }

    static let permanentErrnos: Set<Int32> = [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EACCES, EPERM, EROFS,
                                              ENAMETOOLONG, ELOOP, ENOTDIR, EISDIR]
}
