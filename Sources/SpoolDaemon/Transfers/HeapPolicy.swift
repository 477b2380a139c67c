import CLinux

/// How the daemon uses glibc's heap: freed memory is kept for the next transfer while transfers
/// run, and given back to the kernel on the first quiet turn after them.
///
/// Why: every transfer gets a fresh libcurl handle, whose 256 KiB receive buffer is allocated
/// when it starts and freed when it ends, and a small body is held in a buffer of its own. With
/// glibc's defaults the first such buffers are mapped and unmapped each time, and later ones come
/// from the top of the heap, which glibc shrinks (`brk`) as soon as twice the buffer size is free
/// there; the next transfer then faults in fresh zeroed pages on the transfers' thread. These
/// settings let it reuse them (the fault counts are in Benchmarks/RESULTS.md).
///
/// The sizes: 1 MiB puts the 256 KiB buffers (and `BodyWriter`'s blocks) on the heap; 8 MiB is
/// twice the buffers of 16 running transfers, so the heap's top does not shrink and grow again
/// with each of them. Larger ones save no more faults but keep memory in the other threads'
/// arenas: glibc trims a thread arena's top only past the threshold, and `malloc_trim` never
/// does, so a large queue would cost more per request.
struct HeapPolicy {
    /// Allocations from this size on are mapped apart (glibc's default starts at 128 KiB and rises).
    static let mmapThreshold: Int32 = 1 << 20
    /// Free memory at the top of the heap that is kept rather than given back at once.
    static let trimThreshold: Int32 = 8 << 20
    /// What the heap grows by beyond each request (glibc's default).
    static let topPad: Int32 = 128 << 10

    /// Whether the engine worked since the heap was last given back.
    private(set) var workedSinceGiveBack = false
    private let giveBack: () -> Void

    /// `giveBack` returns the free memory (malloc_trim); tests pass their own.
    init(giveBack: @escaping () -> Void = { _ = spoolfetch_heap_give_back() }) {
        self.giveBack = giveBack
    }

    /// Applies the settings to the whole process (they cannot be undone; call once, at start).
    /// False when glibc refused one.
    @discardableResult
    static func keepFreedMemoryForReuse() -> Bool {
        spoolfetch_heap_keep_for_reuse(mmapThreshold, trimThreshold, topPad) == 1
    }

    /// Called after each engine turn: `working` when transfers run, files are being published, or
    /// the turn handled messages. The first turn without work after some gives the heap back;
    /// the turns after it do nothing. True when this call gave it back.
    @discardableResult
    mutating func turnEnded(working: Bool) -> Bool {
        if working {
            workedSinceGiveBack = true
            return false
        }
        guard workedSinceGiveBack else { return false }
        workedSinceGiveBack = false
        giveBack()
        return true
    }
}
