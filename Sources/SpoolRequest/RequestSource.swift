import Foundation

/// Where a request file's bytes come from, read front to back in chunks, so a parser never
/// needs the whole file in memory.
public protocol RequestByteSource {
    /// Copies the next bytes into `buffer` and returns how many; 0 means the end.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(RequestSourceError) -> Int
}

/// Reading a request file failed (the file is not at fault; do not reject it for this).
public struct RequestSourceError: Error, Sendable, Hashable, CustomStringConvertible {
    public let call: String
    public let errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}

/// Why a request file could not be turned into items: either the file is bad (reject it, with
/// the line and rule) or it could not be read (an I/O error, with the call and errno).
public enum RequestReadError: Error, Sendable, Hashable, CustomStringConvertible {
    case rejected(RequestRejection)
    case unreadable(file: String, RequestSourceError)

    public var description: String {
        switch self {
        case .rejected(let r): r.description
        case .unreadable(let file, let e): "\(file): \(e)"
        }
    }
}

/// Bytes already in memory, handed out in chunks (the in-memory `parse` and tests).
public struct InMemoryRequestSource: RequestByteSource {
    private let bytes: [UInt8]
    private var position = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(RequestSourceError) -> Int {
        let n = min(buffer.count, bytes.count - position)
        guard n > 0 else { return 0 }
        bytes.withUnsafeBytes { src in
            buffer.baseAddress!.copyMemory(from: src.baseAddress! + position, byteCount: n)
        }
        position += n
        return n
    }
}

/// An open file read with `pread` from `offset` on, never moving the descriptor's own offset
/// (the caller may hold it for a lock and read it again later). The descriptor stays the
/// caller's: it is not closed here. (The module's other system calls: `index`'s `fstat`, and
/// `RequestItemReader`'s `pread`.)
public struct DescriptorRequestSource: RequestByteSource {
    public let fd: Int32
    public private(set) var offset: Int64
    /// Bytes still to read; nil reads to the end of the file.
    private var remaining: Int64?

    public init(fd: Int32, offset: Int64 = 0, length: Int64? = nil) {
        self.fd = fd
        self.offset = offset
        self.remaining = length
    }

    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(RequestSourceError) -> Int {
        var want = buffer.count
        if let remaining { want = Int(min(Int64(want), remaining)) }
        guard want > 0 else { return 0 }
        while true {
            let n = pread(fd, buffer.baseAddress, want, off_t(offset))
            if n < 0 {
                if errno == EINTR { continue }
                throw RequestSourceError(call: "pread", errno: errno)
            }
            offset += Int64(n)
            if remaining != nil { remaining! -= Int64(n) }
            return n
        }
    }
}
