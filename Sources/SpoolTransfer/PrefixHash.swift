import Crypto
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

/// The SHA-256 of a segmented body, kept up with its contiguous prefix while its ranges arrive.
///
/// Why: SHA-256 takes bytes only in order, and a body fetched over several connections is
/// written out of order. Hashing it once every range is in (one pass read back from the page
/// cache) cost 0.13–0.18 s per 256 MiB after the network was done: the largest part of the gap
/// between a durable, verified 256 MiB download and the machine's floor. Here a thread of its
/// own hashes each finished range as soon as everything before it is hashed, while the other
/// ranges still arrive (the set hands ranges out in order, in pieces, so the contiguous prefix
/// grows with the body), and at the end only the ranges that finished last remain.
///
/// The contract stays: the bytes are read back from the file after the range's writer finished
/// (`add` is called only then), so the digest is of the bytes on disk, every one of them, in
/// order; a range is hashed once, and the digest is handed out only when `total` is reached.
final class PrefixFollower: @unchecked Sendable {
    typealias Done = @Sendable (Result<(String, HashState), PrefixReadError>) -> Void
    private let condition = NSCondition()
    /// Finished ranges not yet hashed, in any order (they never overlap).
    private var ranges: [(from: Int64, to: Int64)] = []
    private var hashed: Int64
    private var total: Int64?
    private var done: Done?
    private var cancelled = false
    private var failure: Int32 = 0

    /// Follows from `from`, where `sha` (the in-order prefix's state) ends; reads through its own
    /// duplicate of `fd`.
    init(fd: Int32, from: Int64, sha: SHA256) {
        hashed = from
        let own = dup(fd)
        if own < 0 { failure = errno }
        let start = HashState(sha)      // Sendable, unlike SHA256: handed to the thread once
        let thread = Thread { [self] in
            defer { if own >= 0 { close(own) } }
            run(fd: own, sha: start.sha)
        }
        thread.name = "spoolfetch-hash"
        thread.start()
    }

    /// `[from, to)` is in the file, whole, and will not be written again.
    func add(from: Int64, to: Int64) {
        guard to > from else { return }
        condition.lock()
        ranges.append((from, to))
        condition.broadcast()
        condition.unlock()
    }

    /// Calls `done` (on the follower's thread) once `[from, total)` is hashed, or a read failed.
    func finish(total: Int64, done: @escaping Done) {
        condition.lock()
        self.total = total
        self.done = done
        condition.broadcast()
        condition.unlock()
    }

    /// Stops without a digest (the set broke, or the item stopped).
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
    }

    /// How far from the start of the file the hash has reached (for tests and status).
    var hashedBytes: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return hashed
    }

    /// Waits (at most `timeout` seconds) until the hash reached `offset`; whether it did.
    func waitUntilHashed(_ offset: Int64, timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while hashed < offset && failure == 0 && !cancelled {
            if !condition.wait(until: deadline) { break }
        }
        return hashed >= offset
    }

    /// The end of the contiguous run of finished ranges from `hashed` (under the lock).
    private func reach() -> Int64 {
        var end = hashed
        var grew = true
        while grew {
            grew = false
            for r in ranges where r.from <= end && r.to > end { end = r.to; grew = true }
        }
        ranges.removeAll { $0.to <= end }
        return end
    }

    private func run(fd: Int32, sha start: SHA256) {
        var sha = start
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        condition.lock()
        while true {
            if cancelled { condition.unlock(); return }
            if failure != 0, let done {
                condition.unlock()
                done(.failure(PrefixReadError(errno: failure)))
                return
            }
            if failure == 0, let total, hashed >= total, let done {
                condition.unlock()
                done(.success((Hex.encode(sha.finalize()), HashState(sha))))
                return
            }
            let end = failure == 0 ? reach() : hashed
            guard end > hashed else { condition.wait(); continue }
            var offset = hashed
            condition.unlock()
            var error: Int32 = 0
            while offset < end {
                let n = pread(fd, buffer.baseAddress, min(size, Int(end - offset)), off_t(offset))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { error = n == 0 ? EIO : errno; break }
                sha.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                offset += Int64(n)
            }
            condition.lock()
            hashed = offset
            if error != 0 { failure = error }
            condition.broadcast()
        }
    }
}

/// Digests of followers that finished, handed from their threads to the engine's.
final class HashResults: @unchecked Sendable {
    private var results: [(Int, Result<(String, HashState), PrefixReadError>)] = []
    private let lock = NSLock()
    func append(key: Int, _ result: Result<(String, HashState), PrefixReadError>) {
        lock.lock(); results.append((key, result)); lock.unlock()
    }
    func take() -> [(Int, Result<(String, HashState), PrefixReadError>)] {
        lock.lock(); defer { lock.unlock() }
        let all = results
        results.removeAll()
        return all
    }
}
