import Foundation

/// Reading a kept partial back failed (a short file, an I/O error).
public struct PrefixReadError: Error, Sendable {
    public let errno: Int32
}

extension HashState {
    /// Re-hashes the first `length` bytes of a kept partial: after a restart the running hash is
    /// gone, and a resumed body must still be checked whole.
    public static func ofPrefix(fd: Int32, length: Int64) throws(PrefixReadError) -> HashState {
        var state = HashState()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < length {
            let want = Int(min(Int64(buffer.count), length - offset))
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, want, off_t(offset)) }
            if n < 0 { if errno == EINTR { continue }; throw PrefixReadError(errno: errno) }
            if n == 0 { throw PrefixReadError(errno: EIO) }      // shorter than its state says
            buffer.withUnsafeBytes { state.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += Int64(n)
        }
        return state
    }
}
