internal import CLinux
import Crypto
import Foundation

/// How a body was copied from one file into another.
public enum CopyMethod: String, Sendable, Hashable {
    /// `FICLONE`: the copy shares the source's extents (btrfs, xfs with reflink): no data copied.
    case reflink
    /// `copy_file_range`: copied inside the kernel (NFS 4.2 and some filesystems copy on the server).
    case copyFileRange = "copy_file_range"
    /// `pread`/`pwrite` through a buffer: where neither of the above is offered (FUSE, tmpfs across mounts).
    case readWrite = "copy"
}

/// Copies a whole file into another, as cheaply as the filesystem allows: a reflink where it can
/// (the content store's point — a hit then costs no data copy), else `copy_file_range`, else reads
/// and writes. Also the SHA-256 of an open file, read back from the disk.
///
/// Hand-written because no library in the toolchain's package set wraps `FICLONE` or
/// `copy_file_range`; `CrossFilesystemCopy` (the publish across filesystems) copies with the same loop, `copyBytes`.
public enum FileClone {
    /// Makes `out` (open for writing, empty or to be overwritten) a copy of the first `bytes`
    /// bytes of `source`. A source shorter than `bytes` is an error, never a shorter copy.
    /// `reflink: false` skips `FICLONE` (the benchmark's copy, a test of the fallback).
    public static func copy(from source: Int32, sourcePath: String, to out: Int32, outPath: String, bytes: Int64,
                            reflink: Bool = true) throws(StoreError) -> CopyMethod {
        if reflink, spoolfetch_ficlone(out, source) == 0 {
            var st = stat()
            guard fstat(out, &st) == 0 else { throw StoreError("fstat", outPath) }
            if Int64(st.st_size) == bytes { return .reflink }
            // The source is not the size asked for: cut back, or refuse as a short read would.
            guard Int64(st.st_size) > bytes else { throw short(sourcePath, at: Int64(st.st_size), of: bytes) }
            if ftruncate(out, off_t(bytes)) != 0 { throw StoreError("ftruncate", outPath) }
            return .reflink
        }
        if ftruncate(out, 0) != 0 { throw StoreError("ftruncate", outPath) }
        if lseek(out, 0, SEEK_SET) < 0 { throw StoreError("lseek", outPath) }
        return try copyBytes(from: source, sourcePath: sourcePath, to: out, outPath: outPath, bytes: bytes) { offset in
            short(sourcePath, at: offset, of: bytes)
        }
    }

    /// Errors of `copy_file_range` that mean "not for these two files", not a failed copy: the
    /// loop goes on by reads and writes from where it stopped. EXDEV between filesystems of
    /// different types, EINVAL, ENOSYS and EOPNOTSUPP on FUSE and older kernels, and EBADF for an
    /// output open with `O_APPEND` (and some filesystems' pairs of files), which `pwrite` still takes.
    static let copyFileRangeRefusals: Set<Int32> = [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EBADF]

    /// The one copy loop of SpoolStore — a store hit's copy (`copy`) and a publish across
    /// filesystems (`CrossFilesystemCopy`) both use it, so a refusal learned for one (EBADF, once
    /// handled here only) holds for the other. Copies bytes `0 ..< bytes` of `source` to the same
    /// offsets of `out`: `copy_file_range` first, and where it refuses (`copyFileRangeRefusals`)
    /// `pread`/`pwrite` through a buffer from where it stopped. A source that ends early is
    /// `shortRead(offset)`'s error, never a shorter copy. Returns the method that finished the copy.
    static func copyBytes(from source: Int32, sourcePath: String, to out: Int32, outPath: String, bytes: Int64,
                          shortRead: (Int64) -> StoreError) throws(StoreError) -> CopyMethod {
        var offset: Int64 = 0
        var method = CopyMethod.copyFileRange
        var buffer: [UInt8] = []
        while offset < bytes {
            if method == .copyFileRange {
                var inOffset = offset
                let n = spoolfetch_copy_file_range(source, &inOffset, out, UInt(bytes - offset))
                if n > 0 { offset += Int64(n); continue }
                if n == 0 { throw shortRead(offset) }
                if errno == EINTR { continue }
                guard copyFileRangeRefusals.contains(errno) else {
                    throw StoreError("copy_file_range", "\(sourcePath) → \(outPath)")
                }
                method = .readWrite       // and go on from `offset` by reads and writes
                buffer = [UInt8](repeating: 0, count: 1 << 20)
                continue
            }
            let want = Int(min(Int64(buffer.count), bytes - offset))
            let n = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress!, want, off_t(offset)) }
            if n < 0 { if errno == EINTR { continue }; throw StoreError("pread", sourcePath) }
            if n == 0 { throw shortRead(offset) }
            var written = 0
            while written < n {
                let w = buffer.withUnsafeBytes { pwrite(out, $0.baseAddress! + written, n - written, off_t(offset) + off_t(written)) }
                if w < 0 { if errno == EINTR { continue }; throw StoreError("pwrite", outPath) }
                written += w
            }
            offset += Int64(n)
        }
        return method
    }

    /// `FICLONE` alone: true when `out` now shares all of `source`'s extents.
    public static func reflink(from source: Int32, to out: Int32) -> Bool {
        spoolfetch_ficlone(out, source) == 0
    }

    /// The lowercase hex SHA-256 of the whole file `fd` (read with `pread` from byte 0) and its size.
    public static func sha256(of fd: Int32, path: String) throws(StoreError) -> (digest: String, bytes: Int64) {
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, off_t(offset)) }
            if n < 0 { if errno == EINTR { continue }; throw StoreError("pread", path) }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += Int64(n)
        }
        return (hasher.finalize().map { String(format: "%02x", $0) }.joined(), offset)
    }

    private static func short(_ path: String, at offset: Int64, of bytes: Int64) -> StoreError {
        StoreError("read", path, errno: EIO, detail: "the file ends at \(offset) of the \(bytes) bytes to copy")
    }
}

/// utimensat(2)'s "now" and "leave as it is" (macros Swift does not import).
let utimeNow = (1 << 30) - 1
let utimeOmit = (1 << 30) - 2
