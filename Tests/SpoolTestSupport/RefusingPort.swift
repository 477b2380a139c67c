import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP socket on 127.0.0.1 bound but never listening: a connect to its port is refused
/// (ECONNREFUSED) for as long as the socket is open, and no other test can take the port.
public final class RefusingPort {
    private var fd: Int32
    public let port: Int

    public init() throws {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(s, pointer, length) == 0 else { return -1 }
                return getsockname(s, pointer, &length)
            }
        }
        guard bound == 0 else { Glibc.close(s); throw POSIXError(.EADDRINUSE) }
        fd = s
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Lets the port go (a server may take it next).
    public func close() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }

    deinit { close() }
}
