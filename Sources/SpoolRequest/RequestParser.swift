import Foundation

/// Parses and validates request files. Three ways in, one grammar (`RequestBuilder`):
///
/// - `parse(fileName:bytes:limits:)`: bytes in memory → every item in full (`RequestFile`).
///   For small files: `spoolfetch add`, tests.
/// - `index(fileName:descriptor:limits:)`: streams the file in chunks, validates all of it, and
///   keeps only a compact `RequestIndex` — the file's text is never held whole.
/// - `item(_:in:descriptor:)`, `item(_:hostKey:settings:descriptor:)`: re-reads one item's slice (its byte range in the index) and
///   returns the full `RequestItem`, when the item is about to start. `RequestItemReader` does the
///   same for many items of one open file through a window of it (a daemon's item starts, and a
///   group end reading every item's URL).
///
/// All-or-nothing: any bad line rejects the whole file, before any item is handed out. Errors
/// name the file, the line and the rule; they quote at most a key, never a value taken from the
/// file (it came from another program and may hold secrets).
public enum RequestParser {
    public static func parse(fileName: String, bytes: some Collection<UInt8>,
                             limits: ParseLimits = ParseLimits()) throws(RequestRejection) -> RequestFile {
        guard bytes.count <= limits.maxBytes else { throw tooLarge(fileName, limits) }
        var source = InMemoryRequestSource(Array(bytes))
        var builder = RequestBuilder(fileName: fileName, maxItems: limits.maxItems, sink: FullItemSink())
        let total = try inMemory { () throws(RequestReadError) in
            try RequestLines.forEach(in: &source, fileName: fileName, maxBytes: limits.maxBytes) { line, number, offset throws(RequestRejection) in
                try builder.take(line, number: number, offset: offset)
            }
        }
        try builder.finish(end: total)
        return RequestFile(fileName: fileName, group: builder.groupName, items: builder.sink.items,
                           markers: builder.markers ?? .item, onExists: builder.defaults.onExists ?? .keepBoth)
    }

    /// Validates a whole request file read from `source` and returns its index.
    public static func index<Source: RequestByteSource>(fileName: String, source: inout Source,
                                                        limits: ParseLimits = ParseLimits()) throws(RequestReadError) -> RequestIndex {
        var builder = RequestBuilder(fileName: fileName, maxItems: limits.maxItems, sink: SummarySink())
        let total = try RequestLines.forEach(in: &source, fileName: fileName, maxBytes: limits.maxBytes) { line, number, offset throws(RequestRejection) in
            try builder.take(line, number: number, offset: offset)
        }
        do { try builder.finish(end: total) } catch { throw .rejected(error) }
        var items = builder.sink.items
        if items.capacity > items.count + items.count / 16 { items = items.withUnsafeBufferPointer { Array($0) } }  // drop the growth slack
        let settings = RequestFileSettings(fileName: fileName, group: builder.groupName, markers: builder.markers ?? .item,
                                           onExists: builder.defaults.onExists ?? .keepBoth, defaults: builder.defaults)
        var index = RequestIndex(settings: settings, items: items, hosts: builder.sink.hosts, fileSize: Int64(total),
                                 expiryNotes: builder.sink.expiryNotes, uploads: builder.sink.uploads)
        index.itemDeadlines = builder.sink.itemDeadlines
        return index
    }

    /// Validates the request file open as `fd` (read with `pread` from offset 0; the
    /// descriptor's offset is left alone and it is not closed) and returns its index. A file
    /// larger than `limits.maxBytes` is refused before a byte of it is read.
    public static func index(fileName: String, descriptor fd: Int32,
                             limits: ParseLimits = ParseLimits()) throws(RequestReadError) -> RequestIndex {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .unreadable(file: fileName, RequestSourceError(call: "fstat", errno: errno)) }
        guard Int64(st.st_size) <= Int64(limits.maxBytes) else { throw .rejected(tooLarge(fileName, limits)) }
        var source = DescriptorRequestSource(fd: fd)
        return try index(fileName: fileName, source: &source, limits: limits)
    }

    /// `index` over bytes in memory (tests, tools).
    public static func index(fileName: String, bytes: some Collection<UInt8>,
                             limits: ParseLimits = ParseLimits()) throws(RequestRejection) -> RequestIndex {
        guard bytes.count <= limits.maxBytes else { throw tooLarge(fileName, limits) }
        var source = InMemoryRequestSource(Array(bytes))
        return try inMemory { () throws(RequestReadError) in try index(fileName: fileName, source: &source, limits: limits) }
    }

    /// Re-reads one item from its slice of the file — `bytes` must be the file's bytes
    /// `summary.offset ..< summary.offset + summary.length` — applying the file's defaults.
    /// The result equals the item `parse` gives for the whole file. A slice that no longer
    /// reads as the indexed item (the file was changed under its lock) is `changed-on-disk`.
    public static func item(_ summary: ItemSummary, in index: RequestIndex,
                            bytes: some Collection<UInt8>) throws(RequestRejection) -> RequestItem {
        var source = InMemoryRequestSource(Array(bytes))
        return try inMemory { () throws(RequestReadError) in
            try item(summary, hostKey: index.hostKey(of: summary), settings: index.settings, source: &source)
        }
    }

    /// `item(_:in:bytes:)` reading the slice from the open file `fd` with `pread`.
    public static func item(_ summary: ItemSummary, in index: RequestIndex,
                            descriptor fd: Int32) throws(RequestReadError) -> RequestItem {
        try item(summary, hostKey: index.hostKey(of: summary), settings: index.settings, descriptor: fd)
    }

    /// Re-reads one item with only what a daemon keeps of its file: the file's settings and the
    /// item's `host:port` (`hostKey`, which its URL must still have).
    public static func item(_ summary: ItemSummary, hostKey: String, settings: RequestFileSettings,
                            descriptor fd: Int32) throws(RequestReadError) -> RequestItem {
        var source = DescriptorRequestSource(fd: fd, offset: summary.offset, length: Int64(summary.length))
        return try item(summary, hostKey: hostKey, settings: settings, source: &source)
    }

    static func item<Source: RequestByteSource>(_ summary: ItemSummary, hostKey: String, settings: RequestFileSettings,
                                                source: inout Source) throws(RequestReadError) -> RequestItem {
        var builder = RequestBuilder(fileName: settings.fileName, item: Int(summary.index), defaults: settings.defaults,
                                     sink: ChecksummedItemSink())
        let changed = RequestRejection(file: settings.fileName, line: Int(summary.line), rule: "changed-on-disk",
                                       message: "the item's lines differ from when the file was accepted")
        let length: Int
        do {
            length = try RequestLines.forEach(in: &source, fileName: settings.fileName, firstLine: Int(summary.line),
                                              baseOffset: Int(summary.offset), maxBytes: Int(summary.length)) { line, number, offset throws(RequestRejection) in
                try builder.take(line, number: number, offset: offset)
            }
        } catch {
            if case .rejected(let r) = error, r.rule == "too-large" { throw .rejected(changed) }
            throw error
        }
        do { try builder.finish(end: Int(summary.offset) + length) } catch { throw .rejected(error) }
        guard length == Int(summary.length), let item = builder.sink.item, builder.sink.checksum == summary.checksum,
              item.index == Int(summary.index),
              item.line == Int(summary.line), item.url.hostKey == hostKey,
              item.earliestStart == summary.earliestStart, item.expectedBytes == summary.expectedBytes,
              item.priority == summary.priority,
              item.discretionary == summary.discretionary else { throw .rejected(changed) }
        return item
    }

    static func tooLarge(_ fileName: String, _ limits: ParseLimits) -> RequestRejection {
        RequestRejection(file: fileName, line: nil, rule: "too-large",
                         message: "the request file is larger than \(limits.maxBytes) bytes")
    }

    /// Runs a read over bytes in memory, which cannot fail to read.
    static func inMemory<T>(_ body: () throws(RequestReadError) -> T) throws(RequestRejection) -> T {
        do { return try body() } catch {
            switch error {
            case .rejected(let r): throw r
            case .unreadable(_, let e): preconditionFailure("reading bytes in memory failed: \(e)")
            }
        }
    }
}
