import Foundation

/// A file-system operation on the spool failed. Carries the syscall, the path and errno, so an
/// operator can act on it ("No space left on device", "Permission denied" …).
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public let call: String
    public let path: String
    public let errno: Int32

    public init(_ call: String, _ path: String, errno: Int32 = Glibc.errno) {
        self.call = call
        self.path = path
        self.errno = errno
    }

    public var description: String {
        "\(call) \(path): \(String(cString: strerror(errno))) (errno \(errno))"
    }

    public var isDiskFull: Bool { errno == ENOSPC || errno == EDQUOT }
}
