internal import CLinux
import Crypto
import Foundation
import Synchronization

/// A large body's writes and SHA-256, done on a thread of its own while the body still arrives.
///
/// Why: on a multi-MiB body, copying the bytes into fresh page-cache pages (`pwrite`) costs the
/// thread that does it 25–40 % of a 200 × 1 MiB drain's samples, against 3–5 % for receiving
/// them, and hashing about as much again: on the receiving (engine) thread, most of its time.
/// Here the engine only copies each chunk into a block of memory that is reused (warm, already
/// mapped), and this thread writes the block at its offset, hashes it while it is in the cache,
/// and hands the pages to writeback every `writebackChunk`. The first
/// `Transfer.backgroundThreshold` bytes of an attempt are written and hashed by the engine
/// itself: for a 16 KiB body a thread costs more.
///
/// When a block goes: when it is full, or — part-filled — whenever the thread runs out of blocks
/// (at the engine's next chunk, or by taking the engine's block between two chunks). A fast body,
/// whose thread is busy, is written in whole blocks; a slow one (a rate cap, a trickling server,
/// a stall) reaches the file chunk by chunk, and never waits in memory while the thread has
/// nothing to do.
///
/// Back-pressure: at most `queuedBlocks` blocks wait per body. When the disk (or this thread)
/// falls behind, the engine waits in `append` for a block to be written, so a slow disk slows
/// the transfer as the kernel's throttling of dirty pages would. So memory stays bounded:
/// `(queuedBlocks + 1) × blockSize` per running large body.
///
/// Consistency: `finish` waits until every handed-over byte is written and hashed and returns
/// the state with the number of bytes it covers, so a digest, a pause or a resume always covers
/// exactly the bytes on disk. After a failed `pwrite` nothing more is written; `append` reports
/// the errno (the engine aborts the transfer) and `finish` says how many bytes made it.
///
/// Checkpoints: every `syncEvery` bytes the file is made durable (`fdatasync`) on a thread of
/// the system's while this one goes on writing, and `durableBytes` says how far the last one
/// reached — what the daemon records in `B.state`, so that after a power cut a resume builds on
/// bytes that are on the disk (a part not synced can come back at its length with blocks that
/// never reached it). `finish` waits for a checkpoint under way: the descriptor must outlive it.
///
/// Locking: everything the two sides share (`queue`, `offered`, `written`, `handedOver`,
/// `stopping`, `ended`, `writeErrno`, `hinted`, `checkpointing`) is guarded by `condition`: taken
/// twice per chunk (uncontended while the thread writes, which it does outside the lock) and once
/// per full block; the engine copies outside it (and reads `durableBytes`, an atomic, without
/// it). `sha` is touched only by the thread while it runs and by `finish` after the thread has
/// said, under the lock, that it ended.
final class BodyWriter: @unchecked Sendable {
    /// Bytes per block: what the thread writes and hashes in one step.
    static let blockSize = 256 << 10
    /// Blocks that may wait per body (the one being written included) before the engine waits.
    static let queuedBlocks = 4
    /// Every this many bytes written, the range is handed to writeback (`sync_file_range`): on a
    /// machine with lots of RAM the kernel would otherwise keep a whole large file dirty until
    /// the fdatasync before publishing, which then writes it all while nothing else happens.
    static let writebackChunk: Int64 = 8 << 20

    private let condition = NSCondition()
    private let fd: Int32
    private var sha: SHA256
    /// Blocks handed over, oldest first; the one being written stays first until it is written,
    /// so an empty queue means an idle thread.
    private var queue: [Block] = []
    /// The engine's part-filled block between two chunks: the engine takes it back to fill it
    /// further, or the thread takes it when it runs out of blocks.
    private var offered: Block?
    private var handedOver: Int64 = 0
    private var written: Int64
    private var hinted: Int64
    private var stopping = false
    private var ended = false
    private var writeErrno: Int32 = 0
    /// See "Checkpoints"; 0: none. `checkpointedAt`: where the last one began (this thread only).
    private let syncEvery: Int64
    private var checkpointedAt: Int64
    private var checkpointing = false
    private let durable: Atomic<Int64>
    /// Raised after each checkpoint, so that the session looks at its transfers only then.
    private let announce: CheckpointFlag?
    /// False for a segment of a larger body: its bytes are hashed in order at the end instead.
    private let hashing: Bool

    /// Starts writing into `fd` from `offset` (the bytes before it are on disk and hashed into
    /// `sha`); `writebackFrom` is where the range not yet handed to writeback starts. `durableFrom`:
    /// how many bytes are known durable already (a resume's synced prefix); `syncEvery`: the
    /// checkpoint interval (0: none).
    init(fd: Int32, sha: SHA256, from offset: Int64, writebackFrom: Int64, durableFrom: Int64 = 0, syncEvery: Int64 = 0,
         announce: CheckpointFlag? = nil, hashing: Bool = true) {
        self.hashing = hashing
        self.fd = fd
        self.announce = announce
        self.sha = sha
        written = offset
        hinted = writebackFrom
        self.syncEvery = syncEvery
        checkpointedAt = durableFrom
        durable = Atomic(durableFrom)
        let thread = Thread { [self] in run() }
        thread.name = "spoolfetch-write"
        thread.start()
    }

    /// Bytes from the start of the file that the last checkpoint made durable. Read by the engine
    /// on every turn, hence an atomic rather than the lock.
    var durableBytes: Int64 { durable.load(ordering: .acquiring) }

    /// Bytes the thread has taken so far (queued, written or being written), from its start.
    var bytesHandedOver: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return handedOver
    }

    /// Hands over `bytes`, which go at `offset` (contiguous with what came before). Returns the
    /// errno of a write that failed on the thread (0: none so far); the caller then stops.
    /// Takes the lock twice (the copy is made outside it), and once more per full block.
    func append(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        condition.lock()
        var block = offered
        offered = nil
        let failure = writeErrno
        condition.unlock()
        if failure != 0 {
            block?.release()
            return failure
        }
        var taken = 0
        while taken < bytes.count {
            if block == nil { block = Block(offset: offset + Int64(taken)) }
            taken += block!.fill(from: UnsafeRawBufferPointer(rebasing: bytes[taken...]))
            if block!.isFull {
                let error = enqueue(block!)
                block = nil
                if error != 0 { return error }
            }
        }
        condition.lock()
        defer { condition.unlock() }
        guard let block else { return writeErrno }
        if writeErrno != 0 {
            block.release()
        } else if queue.isEmpty {
            // The thread has nothing to do: it takes the part-filled block now.
            queue.append(block)
            handedOver += Int64(block.count)
            condition.broadcast()
        } else {
            offered = block
        }
        return writeErrno
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
        handedOver += Int64(block.count)
        condition.broadcast()
        return 0
    }

    /// Waits until every handed-over byte is written and hashed, stops the thread, and returns the
    /// state, the bytes it covers, the errno of a failed write (0: none) and where the range not
    /// yet handed to writeback starts.
    /// The file offset up to which the thread has written (not necessarily synced): what a killed
    /// process leaves in the page cache.
    var writtenBytes: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return written
    }

    func finish() -> (sha: SHA256, written: Int64, errno: Int32, writebackFrom: Int64) {
        condition.lock()
        stopping = true
        condition.broadcast()
        while !ended || checkpointing { condition.wait() }
        let result = (sha, written, writeErrno, hinted)
        condition.unlock()
        return result
    }

    private func run() {
        condition.lock()
        while true {
            while queue.isEmpty && offered == nil && !stopping { condition.wait() }
            if queue.isEmpty, let block = offered {
                offered = nil
                queue.append(block)
                handedOver += Int64(block.count)
            }
            guard let block = queue.first else { break }   // stopping, and everything is written
            condition.unlock()
            let error = writeAndHash(block)
            condition.lock()
            queue.removeFirst()
            block.release()
            if error != 0 {
                writeErrno = error
                for rest in queue { rest.release() }
                queue = []
                offered?.release()
                offered = nil
                condition.broadcast()
                break
            }
            written = block.offset + Int64(block.count)
            if written - hinted >= Self.writebackChunk {
                // Errors are ignored: it is only a hint, and the final fdatasync reports real ones.
                _ = spoolfetch_start_writeback(fd, hinted, written - hinted)
                hinted = written
            }
            if syncEvery > 0, !checkpointing, written - checkpointedAt >= syncEvery {
                checkpointing = true
                checkpointedAt = written
                checkpoint(upTo: written)
            }
            condition.broadcast()
        }
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// `fdatasync` off this thread, which goes on writing (the disk is the slow part, and this
    /// thread would only wait): bytes written before the call are durable when it returns.
    /// A failure only means no checkpoint: the sync before publishing reports real errors.
    private func checkpoint(upTo length: Int64) {
        DispatchQueue.global(qos: .utility).async { [self] in
            let synced = fdatasync(fd) == 0
            condition.lock()
            if synced {
                durable.store(length, ordering: .releasing)
                announce?.raise()
            }
            checkpointing = false
            condition.broadcast()
            condition.unlock()
        }
    }

    private func writeAndHash(_ block: Block) -> Int32 {
        let bytes = UnsafeRawBufferPointer(start: block.memory, count: block.count)
        let error = writeAll(fd, bytes, at: block.offset)
        if error == 0 && hashing { sha.update(bufferPointer: bytes) }
        return error
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

/// Set by a body's writer when a checkpoint completes, taken down by the session when it looks:
/// the engine's every turn costs one atomic load, not a walk over its transfers.
final class CheckpointFlag: Sendable {
    private let raised = Atomic<Bool>(false)
    func raise() { raised.store(true, ordering: .releasing) }
    /// Whether it was raised since the last call (and lowers it).
    func take() -> Bool { raised.load(ordering: .acquiring) && raised.exchange(false, ordering: .acquiringAndReleasing) }
}
