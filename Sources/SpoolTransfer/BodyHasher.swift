import Crypto
import Foundation

/// The SHA-256 of a large body, computed on a thread of its own while the body is still arriving.
///
/// Why: on the receiving thread, hashing costs about as much as receiving and writing together
/// (a 1 GiB body spends ~0.6 s in SHA-256 here), and the transfer cannot overlap the two. The
/// receiving thread keeps writing the body into the staging file straight from libcurl's buffer
/// (no extra copy on its side); this thread reads the written range back from the page cache with
/// `pread` and feeds the hash, in order, about a `chunk` behind. The writer tells it how far the
/// file is written (`advance`, every `chunk`); `finish` waits until everything written is hashed
/// and hands the state back, so a digest, a pause or a resume always covers exactly the bytes on
/// disk. The engine waits in `finish` for at most about a `chunk` of hashing, which is why the
/// chunk is small (256 KiB): with 1 MiB steps, a 1 MiB body would be hashed at its end, on the
/// engine's time.
///
/// Locking: `written`, `hashed`, `stopping`, `readErrno` and `ended` are guarded by `condition`.
/// `sha` is touched only by the thread while it runs, and by `finish` after the thread has
/// said, under the lock, that it ended — so the two never overlap.
final class BodyHasher: @unchecked Sendable {
    /// Bytes read and hashed per step (the hash runs about this far behind the writes).
    static let chunk = 256 << 10

    private let condition = NSCondition()
    private let fd: Int32
    private var sha: SHA256
    private var hashed: Int64
    private var written: Int64
    private var stopping = false
    private var ended = false
    private var readErrno: Int32 = 0

    /// Starts hashing `fd` from `offset`, with `sha` the state of the bytes before it.
    init(fd: Int32, sha: SHA256, from offset: Int64) {
        self.fd = fd
        self.sha = sha
        hashed = offset
        written = offset
        let thread = Thread { [self] in run() }
        thread.name = "spoolfetch-hash"
        thread.start()
    }

    /// The writer has written the file up to `offset` (monotonic).
    func advance(to offset: Int64) {
        condition.lock()
        if offset > written {
            written = offset
            condition.signal()
        }
        condition.unlock()
    }

    /// Waits until every written byte is hashed, stops the thread, and returns the state with the
    /// number of bytes it covers. `errno` is non-zero when reading the file back failed; the state
    /// then covers only `hashed` bytes.
    func finish() -> (sha: SHA256, hashed: Int64, errno: Int32) {
        condition.lock()
        stopping = true
        condition.broadcast()
        while !ended { condition.wait() }
        let result = (sha, hashed, readErrno)
        condition.unlock()
        return result
    }

    private func run() {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: Self.chunk, alignment: 4096)
        defer { buffer.deallocate() }
        condition.lock()
        while true {
            while hashed >= written && !stopping { condition.wait() }
            if hashed >= written { break }   // stopping, and everything written is hashed
            let start = hashed
            let end = min(written, start + Int64(Self.chunk))
            condition.unlock()
            let error = readAndHash(buffer, from: start, count: Int(end - start))
            condition.lock()
            if error != 0 { readErrno = error; break }
            hashed = end
        }
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// Reads `count` bytes at `offset` back from the file (the page cache) and hashes them.
    private func readAndHash(_ buffer: UnsafeMutableRawPointer, from offset: Int64, count: Int) -> Int32 {
        var got = 0
        while got < count {
            let n = pread(fd, buffer + got, count - got, off_t(offset) + off_t(got))
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            if n == 0 { return EIO }   // shorter than written: someone truncated the file
            got += n
        }
        sha.update(bufferPointer: UnsafeRawBufferPointer(start: buffer, count: count))
        return 0
    }
}
