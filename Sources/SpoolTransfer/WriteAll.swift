import Foundation

/// Writes all of `bytes` at `offset` with `pwrite` (at a known offset: no seek, and no dependence
/// on the descriptor's shared position), going on after short writes and `EINTR`. Returns 0, or
/// the errno of the write that failed (bytes before it may be in the file).
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
    var done = 0
    while done < bytes.count {
        let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
        if n < 0 {
            if errno == EINTR { continue }
            return errno
        }
        done += n
    }
    return 0
}
