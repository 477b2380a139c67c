import Foundation

/// Splits a request file into lines while reading it in fixed-size chunks: memory stays one
/// chunk plus the longest line, whatever the file's size.
///
/// A line ends at LF; a CR right before the LF belongs to the line ending (CRLF files). A
/// UTF-8 byte order mark at the start of the file is skipped. Each line is handed to `body`
/// with its 1-based number and the byte offset of its first byte in the file, so an item can
/// later be re-read from exactly its own bytes.
struct RequestLines {
    static let chunkSize = 256 * 1024

    /// - Parameters:
    ///   - firstLine: the number of the source's first line (1 for a whole file; an item's
    ///     `line` when re-reading one item's slice).
    ///   - baseOffset: the file offset of the source's first byte.
    ///   - maxBytes: more bytes than this throw `too-large`.
    /// - Returns: the number of bytes read.
    @discardableResult
    static func forEach<Source: RequestByteSource>(
        in source: inout Source, fileName: String, firstLine: Int = 1, baseOffset: Int = 0, maxBytes: Int,
        _ body: (_ line: UnsafeBufferPointer<UInt8>, _ number: Int, _ offset: Int) throws(RequestRejection) -> Void
    ) throws(RequestReadError) -> Int {
        // An item's slice is a line or a few: a chunk of its own size, not 256 KiB. (Each start
        // re-reads its item; a 256 KiB buffer per start would cost page faults and malloc time.)
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, min(chunkSize, maxBytes)), alignment: 16)
        defer { chunk.deallocate() }
        var carry: [UInt8] = []          // a line begun in an earlier chunk
        var carryOffset = 0
        var number = firstLine
        var total = 0

        func emit(_ line: UnsafeBufferPointer<UInt8>, offset: Int) throws(RequestReadError) {
            var line = line
            var offset = offset
            if number == 1 && offset == 0 && line.count >= 3 && line[0] == 0xEF && line[1] == 0xBB && line[2] == 0xBF {
                line = UnsafeBufferPointer(rebasing: line[3...])
                offset = 3
            }
            if let last = line.last, last == 0x0D { line = UnsafeBufferPointer(rebasing: line.dropLast()) }
            do { try body(line, number, offset) } catch { throw .rejected(error) }
            number += 1
        }

        while true {
            let n: Int
            do { n = try source.read(into: chunk) } catch { throw RequestReadError.unreadable(file: fileName, error) }
            if n == 0 { break }
            let chunkOffset = baseOffset + total
            total += n
            guard total <= maxBytes else {
                throw .rejected(RequestRejection(file: fileName, line: nil, rule: "too-large",
                                                 message: "the request file is larger than \(maxBytes) bytes"))
            }
            let bytes = UnsafeBufferPointer(start: chunk.baseAddress!.assumingMemoryBound(to: UInt8.self), count: n)
            var start = 0
            while let lf = bytes[start...].firstIndex(of: 0x0A) {
                if carry.isEmpty {
                    try emit(UnsafeBufferPointer(rebasing: bytes[start..<lf]), offset: chunkOffset + start)
                } else {
                    carry.append(contentsOf: bytes[start..<lf])
                    try carry.withUnsafeBufferPointer { (b) throws(RequestReadError) in try emit(b, offset: carryOffset) }
                    carry.removeAll(keepingCapacity: true)
                }
                start = lf + 1
            }
            if start < n {
                if carry.isEmpty { carryOffset = chunkOffset + start }
                carry.append(contentsOf: bytes[start..<n])
            }
        }
        if !carry.isEmpty {
            try carry.withUnsafeBufferPointer { (b) throws(RequestReadError) in try emit(b, offset: carryOffset) }
        }
        return total
    }
}
