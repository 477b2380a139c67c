import Foundation

/// A small JSON object writer: the one serialisation of the spool's records (`SpoolRecord`:
/// markers, states, journals, group markers, error records). JSONEncoder cost about a tenth of
/// the daemon's CPU on many small files; this writes the same bytes (keys in sorted order, no
/// spaces, `/` unescaped), which the store tests check against JSONEncoder.
struct JSONObjectWriter {
    private(set) var bytes: [UInt8]
    private var first = true

    /// `capacity`: the bytes to reserve. A marker is 400-600 bytes: one allocation instead of
    /// a few regrowths.
    init(capacity: Int = 768) {
        bytes = [0x7B]
        bytes.reserveCapacity(capacity)
    }

    private mutating func key(_ name: StaticString) {
        if !first { bytes.append(0x2C) }
        first = false
        bytes.append(0x22)
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(0x22)
        bytes.append(0x3A)
    }

    mutating func string(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        Self.appendString(value, to: &bytes)
    }

    mutating func int(_ name: StaticString, _ value: Int64?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    /// Inode numbers are unsigned 64-bit: GlusterFS and other FUSE or network filesystems hand
    /// out numbers of 2^63 and more, which a signed field would write negative.
    mutating func uint(_ name: StaticString, _ value: UInt64?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func raw(_ name: StaticString, _ json: [UInt8]?) {
        guard let json else { return }
        key(name)
        bytes.append(contentsOf: json)
    }

    /// An array of arrays of integers (a segmented state's ranges).
    mutating func intArrays(_ name: StaticString, _ values: [[Int64]]?) {
        guard let values else { return }
        key(name)
        bytes.append(0x5B)
        for (i, row) in values.enumerated() {
            if i > 0 { bytes.append(0x2C) }
            bytes.append(0x5B)
            for (j, value) in row.enumerated() {
                if j > 0 { bytes.append(0x2C) }
                bytes.append(contentsOf: String(value).utf8)
            }
            bytes.append(0x5D)
        }
        bytes.append(0x5D)
    }

    /// An object of strings, its members in the order given (the caller sorts them).
    mutating func object(_ name: StaticString, _ members: [(key: String, value: String)]) {
        key(name)
        bytes.append(0x7B)
        for (i, member) in members.enumerated() {
            if i > 0 { bytes.append(0x2C) }
            Self.appendString(member.key, to: &bytes)
            bytes.append(0x3A)
            Self.appendString(member.value, to: &bytes)
        }
        bytes.append(0x7D)
    }

    /// An array of objects, each written by `element` into a writer of its own over the same bytes.
    mutating func array<T>(_ name: StaticString, _ values: [T], _ element: (T, inout JSONObjectWriter) -> Void) {
        key(name)
        bytes.append(0x5B)
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(0x2C) }
            // The element's writer takes the bytes over by a swap: with a second reference,
            // its first append would copy everything written so far.
            var inner = JSONObjectWriter(capacity: 0)
            inner.bytes = []
            swap(&inner.bytes, &bytes)
            inner.bytes.append(0x7B)
            element(value, &inner)
            swap(&inner.bytes, &bytes)
            bytes.append(0x7D)
        }
        bytes.append(0x5D)
    }

    mutating func close() -> [UInt8] {
        bytes.append(0x7D)
        return bytes
    }

    /// Appends `s` as a JSON string. Runs of bytes that need no escape (nearly all of a URL, a
    /// name or a digest) are copied at once: on many small files this runs for every marker, and
    /// a byte-at-a-time append would be the daemon's busiest Swift function.
    static func appendString(_ s: String, to out: inout [UInt8]) {
        var s = s
        out.append(0x22)
        s.withUTF8 { utf8 in
            var runStart = 0
            for (i, b) in utf8.enumerated() where b < 0x20 || b == 0x22 || b == 0x5C {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
                appendEscape(of: b, to: &out)
                runStart = i + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        out.append(0x22)
    }

    /// The escape JSONEncoder writes for `b` (a quote, a backslash or a control character).
    private static func appendEscape(of b: UInt8, to out: inout [UInt8]) {
        out.append(0x5C)
        switch b {
        case 0x22, 0x5C: out.append(b)
        case 0x0A: out.append(0x6E)
        case 0x0D: out.append(0x72)
        case 0x09: out.append(0x74)
        case 0x08: out.append(0x62)
        case 0x0C: out.append(0x66)
        default:
            let hex: StaticString = "0123456789abcdef"
            out.append(contentsOf: [0x75, 0x30, 0x30, hex.utf8Start[Int(b >> 4)], hex.utf8Start[Int(b & 0xF)]])
        }
    }
}
