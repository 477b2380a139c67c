import Foundation

/// Re-reads many items of one open request file through a window of its bytes, so that items
/// read in file order cost a `pread` per window instead of one each.
///
/// Why: a daemon keeps only each item's `ItemSummary` and reads the item's lines back when it
/// starts, and again (for its URL) when its group ends. One `pread` per item would be two system
/// calls an item on the engine thread, half of them in a row at the group's end while nothing
/// else runs.
///
/// The window grows like a kernel's readahead: it starts at `minimumRead` and doubles each time a
/// read moves forward past it, up to `maximumRead`; a read behind the window starts small again.
/// So a list read front to back costs a handful of reads, and an item read out of order (a retry,
/// another priority) costs one small read, not a large one.
///
/// The bytes served are checked as a fresh read's are (the summary's length and checksum), so
/// the window only ever serves an item as it was accepted; a change on disk made after the window
/// was read is seen by the items read in a later window, not by those already in it. The
/// descriptor stays the caller's: it is neither closed nor moved (`pread` only). Not thread-safe.
public final class RequestItemReader {
    /// The first read's size, and the size after a read behind the window.
    public static let minimumRead = 4 << 10
    /// The largest window (an item longer than this is read whole, in one window of its size).
    public static let maximumRead = 256 << 10

    public let fd: Int32
    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private var windowStart: Int64 = 0
    private var windowCount = 0
    private var nextRead = RequestItemReader.minimumRead
    /// `pread` calls made so far (tests and diagnostics).
    public private(set) var reads = 0

    public init(fd: Int32) { self.fd = fd }

    deinit { buffer.deallocate() }

    /// The item `summary` describes, read from the window (refilled if the item's slice is not
    /// all in it). Equals `RequestParser.item(_:hostKey:settings:descriptor:)`.
    public func item(_ summary: ItemSummary, hostKey: String, settings: RequestFileSettings) throws(RequestReadError) -> RequestItem {
        let length = Int(summary.length)
        if summary.offset < windowStart || summary.offset + Int64(length) > windowStart + Int64(windowCount) {
            do { try fill(at: summary.offset, atLeast: length) } catch {
                throw .unreadable(file: settings.fileName, error)
            }
        }
        // A file shorter than when it was indexed serves fewer bytes; the parse then finds the
        // length wrong and says `changed-on-disk`.
        let from = Int(summary.offset - windowStart)
        let available = max(0, min(length, windowCount - from))
        var source = BorrowedBytesSource(UnsafeRawBufferPointer(start: buffer.baseAddress.map { $0 + from }, count: available))
        return try RequestParser.item(summary, hostKey: hostKey, settings: settings, source: &source)
    }

    private func fill(at offset: Int64, atLeast length: Int) throws(RequestSourceError) {
        let forward = windowCount > 0 && offset >= windowStart
        nextRead = forward ? min(nextRead * 2, Self.maximumRead) : Self.minimumRead
        let want = max(length, nextRead)
        if buffer.count < want {
            buffer.deallocate()
            buffer = .allocate(byteCount: want, alignment: 16)
        }
        windowStart = offset
        windowCount = 0
        while windowCount < want {
            reads += 1
            let n = pread(fd, buffer.baseAddress! + windowCount, want - windowCount, off_t(offset) + off_t(windowCount))
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                windowCount = 0
                throw RequestSourceError(call: "pread", errno: code)
            }
            if n == 0 { break }
            windowCount += n
        }
    }
}

/// Bytes the caller owns and keeps alive while the source is read.
struct BorrowedBytesSource: RequestByteSource {
    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(RequestSourceError) -> Int {
        let n = min(buffer.count, bytes.count - position)
        guard n > 0 else { return 0 }
        buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + position, byteCount: n)
        position += n
        return n
    }
}
