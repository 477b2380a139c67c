import Synchronization

/// A small body's bytes, received whole but not written to its destination file: the caller
/// writes them on another thread (the daemon: its part writer, and the publisher before it
/// journals, syncs or names the file, should they still be there).
///
/// Why: on many small files with a group marker the engine's thread is the daemon's bottleneck,
/// and a third of its time went into `pwrite` (the copy into fresh page-cache pages). The bytes
/// are copied once more in memory (cheap: they are hot in the cache) and written on the other core.
///
/// Only a transfer that asks for it (`TransferRequest.writeBehind`), starts from byte 0, gets a
/// 200 with a `Content-Length` under `WriteBehind.limit`, and finds room in `WriteBehind.budget`
/// is written so; anything else is written as it arrives. A transfer that does not end in
/// success (failed, cancelled) writes its bytes before it reports, so a partial on disk always
/// matches the bytes and hash the outcome reports.
public final class ReceivedBody: @unchecked Sendable {
    /// Where `bytes` go in the destination file.
    public let offset: Int64
    public let bytes: [UInt8]
    private let reserved: Int

    init(offset: Int64, bytes: [UInt8], reserved: Int) {
        self.offset = offset
        self.bytes = bytes
        self.reserved = reserved
    }

    deinit { WriteBehind.budget.release(reserved) }
}

/// The limits of writing behind: a body's size, and all bodies' bytes held at once.
public enum WriteBehind {
    /// A body this large or larger is not held (from this size on, the rest of a body is written
    /// and hashed on a thread of its own as it arrives: `BodyWriter`).
    public static let limit: Int64 = 128 << 10

    /// Bytes held at once, across every transfer and the publish queue. Past it, bodies are
    /// written as they arrive: a slow final folder must not turn into memory growth.
    public static let budget = WriteBehindBudget(capacity: 16 << 20)
}

/// Bytes of memory that received bodies may hold. Taken on the engine thread, given back
/// wherever a `ReceivedBody` is released (the publisher's thread, usually): hence atomic.
public final class WriteBehindBudget: Sendable {
    private let available: Atomic<Int>
    public let capacity: Int

    public init(capacity: Int) {
        self.capacity = capacity
        available = Atomic(capacity)
    }

    /// Takes `bytes` if that many are free.
    func reserve(_ bytes: Int) -> Bool {
        var current = available.load(ordering: .relaxed)
        while current >= bytes {
            let (exchanged, original) = available.compareExchange(expected: current, desired: current - bytes,
                                                                  ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    func release(_ bytes: Int) {
        if bytes > 0 { available.add(bytes, ordering: .acquiringAndReleasing) }
    }

    /// Bytes held now (tests).
    public var held: Int { capacity - available.load(ordering: .relaxed) }
}
