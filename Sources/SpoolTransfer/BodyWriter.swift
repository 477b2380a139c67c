internal import CLinux
import Crypto
import Foundation
import Synchronization

/// A large body's writes and SHA-256, done on a thread of its own while the body still arrives.
///
/// Why: on a multi-MiB body the receiving (engine) thread spent most of its time copying the
/// bytes into fresh page-cache pages (`pwrite`: 25–40 % of a 200 × 1 MiB drain's samples, against
/// 3–5 % for receiving them), and hashing costs about as much again. Here the engine only copies
/// each chunk into a block of memory that is reused (warm, already mapped), and this thread
/// writes the block at its offset, hashes it while it is in the cache, and hands the pages to
/// writeback every `writebackChunk`. The first `Transfer.backgroundThreshold` bytes of an
/// attempt are written and hashed by the engine itself: for a 16 KiB body a thread costs more.
///
/// Back-pressure: at most `queuedBlocks` full blocks wait per body. When the disk (or this
/// thread) falls behind, the engine waits in `append` for a block to be written — where it
/// used to wait in `pwrite` when the kernel throttled dirty pages. So memory stays bounded:
/// `(queuedBlocks + 1) × blockSize` per running large body.
///
/// Consistency: `finish` waits until every handed-over byte is written and hashed and returns
/// the state with the number of bytes it covers, so a digest, a pause or a resume always covers
/// exactly the bytes on disk. After a failed `pwrite` nothing more is written; `append` reports
/// the errno (the engine aborts the transfer) and `finish` says how many bytes made it.
///
/// Locking: `queue`, `written`, `stopping`, `ended`, `writeErrno` and `hinted` are guarded by
/// `condition`, taken once per block (256 KiB), not per chunk; `failed` mirrors `writeErrno` for
/// the per-chunk check. `sha` is touched only by the thread while it runs and by `finish` after the
/// thread has said, under the lock, that it ended. `filling` belongs to the engine alone.
final class BodyWriter: @unchecked Sendable {
    /// Bytes per block: what the thread writes and hashes in one step.
    static let blockSize = 256 << 10
    /// Full blocks that may wait per body before the engine waits for the thread.
    static let queuedBlocks = 4
    /// Every this many bytes written, the range is handed to writeback (`sync_file_range`): on a
    /// machine with lots of RAM the kernel would otherwise keep a whole large file dirty until
    /// the fdatasync before publishing, which then writes it all while nothing else happens.
    static let writebackChunk: Int64 = 8 << 20

    private let condition = NSCondition()
    private let fd: Int32
    private var sha: SHA256
    private var queue: [Block] = []
    private var filling: Block?
    private var written: Int64
    private var hinted: Int64
    private var stopping = false
    private var ended = false
    private var writeErrno: Int32 = 0
    /// `writeErrno`, readable without the lock.
    private let failed = Atomic<Int32>(0)

    /// Starts writing into `fd` from `offset` (the bytes before it are on disk and hashed into
    /// `sha`); `writebackFrom` is where the range not yet handed to writeback starts.
    init(fd: Int32, sha: SHA256, from offset: Int64, writebackFrom: Int64) {
        self.fd = fd
        self.sha = sha
        written = offset
        hinted = writebackFrom
        let thread = Thread { [self] in run() }
        thread.name = "spoolfetch-write"
        thread.start()
    }

    /// Hands over `bytes`, which go at `offset` (contiguous with what came before). Returns the
    /// errno of a write that failed on the thread (0: none so far); the caller then stops.
    func append(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        var taken = 0
        while taken < bytes.count {
            if filling == nil { filling = Block(offset: offset + Int64(taken)) }
            let n = filling!.fill(from: UnsafeRawBufferPointer(rebasing: bytes[taken...]))
            taken += n
            if filling!.isFull {
                let error = enqueue(filling!)
                filling = nil
                if error != 0 { return error }
            }
        }
        // Read without the lock (once per chunk): the lock is taken once per block.
        return failed.load(ordering: .acquiring)
    }

    private func enqueue(_ block: Block) -> Int32 {
        condition.lock()
        defer { condition.unlock() }
        while queue.count >= Self.queuedBlocks && writeErrno == 0 { condition.wait() }
        if writeErrno != 0 {
            block.release()
            return writeErrno
        }
        queue.append(block)
        condition.broadcast()
        return 0
    }

    /// Waits until every handed-over byte is written and hashed, stops the thread, and returns the
    /// state, the bytes it covers, the errno of a failed write (0: none) and where the range not
    /// yet handed to writeback starts.
    func finish() -> (sha: SHA256, written: Int64, errno: Int32, writebackFrom: Int64) {
        if let block = filling {
            filling = nil
            if block.count > 0 { _ = enqueue(block) } else { block.release() }
        }
        condition.lock()
        stopping = true
        condition.broadcast()
        while !ended { condition.wait() }
        let result = (sha, written, writeErrno, hinted)
        condition.unlock()
        return result
    }

    private func run() {
        condition.lock()
        while true {
            while queue.isEmpty && !stopping { condition.wait() }
            guard let block = queue.first else { break }   // stopping, and everything is written
            condition.unlock()
            let error = writeAndHash(block)
            condition.lock()
            queue.removeFirst()
            block.release()
            if error != 0 {
                writeErrno = error
                failed.store(error, ordering: .releasing)
                for rest in queue { rest.release() }
                queue = []
                condition.broadcast()
                break
            }
            written = block.offset + Int64(block.count)
            if written - hinted >= Self.writebackChunk {
                // Errors are ignored: it is only a hint, and the final fdatasync reports real ones.
                _ = spoolfetch_start_writeback(fd, hinted, written - hinted)
                hinted = written
            }
            condition.broadcast()
        }
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    private func writeAndHash(_ block: Block) -> Int32 {
        var done = 0
        while done < block.count {
            let n = pwrite(fd, block.memory + done, block.count - done, off_t(block.offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += n
        }
        sha.update(bufferPointer: UnsafeRawBufferPointer(start: block.memory, count: block.count))
        return 0
    }
}

/// One `BodyWriter.blockSize` of memory from `BlockPool`, with the file offset of its first byte.
private final class Block {
    let offset: Int64
    let memory: UnsafeMutableRawPointer
    private(set) var count = 0

    init(offset: Int64) {
        self.offset = offset
        memory = BlockPool.shared.take()
    }

    var isFull: Bool { count == BodyWriter.blockSize }

    /// Copies as much of `bytes` as fits; returns how many.
    func fill(from bytes: UnsafeRawBufferPointer) -> Int {
        let n = min(bytes.count, BodyWriter.blockSize - count)
        (memory + count).copyMemory(from: bytes.baseAddress!, byteCount: n)
        count += n
        return n
    }

    /// Gives the memory back to the pool (once; the block is not used after).
    func release() { BlockPool.shared.give(memory) }
}

/// Blocks of memory kept for reuse across bodies. Why not `malloc` per block: a fresh 256 KiB
/// allocation is mapped anew and its pages are faulted in on first touch — the very cost the
/// writer thread exists to take off the engine (on this kind of virtual machine, first touches
/// of fresh pages dominated the copy). Up to `kept` blocks stay mapped between bodies.
private final class BlockPool: Sendable {
    static let shared = BlockPool()
    /// Blocks kept when given back: 16 running large bodies × (queue + the one filling) would
    /// need 80; 32 keep the common case warm without holding 20 MiB forever.
    static let kept = 32
    /// Addresses of the kept blocks (as integers: a Mutex holds only what may cross threads).
    private let free = Mutex<[UInt]>([])

    func take() -> UnsafeMutableRawPointer {
        if let address = free.withLock({ $0.popLast() }), let memory = UnsafeMutableRawPointer(bitPattern: address) {
            return memory
        }
        return UnsafeMutableRawPointer.allocate(byteCount: BodyWriter.blockSize, alignment: 4096)
    }

    func give(_ memory: UnsafeMutableRawPointer) {
        let address = UInt(bitPattern: memory)
        let kept = free.withLock { list in
            guard list.count < Self.kept else { return false }
            list.append(address)
            return true
        }
        if !kept { memory.deallocate() }
    }
}
