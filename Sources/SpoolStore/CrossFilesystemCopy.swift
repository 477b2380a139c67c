internal import CLinux
import Crypto
import Foundation

/// Copies a verified part into a final folder on another filesystem, where it cannot be renamed.
///
/// `copy_file_range` first (in-kernel, no copy through user space); where it refuses (see
/// `FileClone.copyFileRangeRefusals`) plain `pread`/`pwrite` from where it stopped: the loop is
/// `FileClone.copyBytes`, shared with the store's hits. A read that ends before the expected size
/// is an error, never a shorter file. The copy is fsynced, then read back and checked against the
/// marker's size and sha256 before the caller gives it its name: what the marker promises is what
/// the consumer finds.
struct CrossFilesystemCopy {
    let part: StagingFile
    let partPath: String
    /// The marker's size and digest (lowercase hex).
    let bytes: Int64
    let sha256: String

    /// Writes the copy to `temp` in `folder` (created fresh); removed again on any error.
    func copy(into folder: Directory, as temp: String) throws(StoreError) {
        var st = stat()
        guard fstat(part.fd, &st) == 0 else { throw StoreError("fstat", partPath) }
        guard Int64(st.st_size) == bytes else {
            throw StoreError("fstat", partPath, errno: EIO,
                             detail: "the staged file has \(st.st_size) bytes, its marker says \(bytes)")
        }
        let out = try folder.createFresh(temp, access: O_RDWR)
        defer { close(out) }
        let outPath = folder.path(of: temp)
        do throws(StoreError) {
            try transfer(to: out, outPath: outPath)
            if fsync(out) != 0 { throw StoreError("fsync", outPath) }
            try verify(out, outPath: outPath)
        } catch {
            folder.remove(temp)
            throw error
        }
    }

    /// `FileClone.copyBytes`, SpoolStore's one copy loop: its refusals of `copy_file_range`
    /// and its fallback are the store hit's.
    private func transfer(to out: Int32, outPath: String) throws(StoreError) {
        _ = try FileClone.copyBytes(from: part.fd, sourcePath: partPath, to: out, outPath: outPath, bytes: bytes,
                                    shortRead: shortRead(at:))
    }

    /// Reads the copy back: its size and sha256 must be the marker's.
    private func verify(_ out: Int32, outPath: String) throws(StoreError) {
        var st = stat()
        guard fstat(out, &st) == 0 else { throw StoreError("fstat", outPath) }
        guard Int64(st.st_size) == bytes else {
            throw StoreError("verify", outPath, errno: EIO, detail: "the copy has \(st.st_size) bytes, the marker says \(bytes)")
        }
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < bytes {
            let want = Int(min(Int64(buffer.count), bytes - offset))
            let n = buffer.withUnsafeMutableBytes { pread(out, $0.baseAddress!, want, off_t(offset)) }
            if n < 0 { if errno == EINTR { continue }; throw StoreError("pread", outPath) }
            if n == 0 { throw StoreError("verify", outPath, errno: EIO, detail: "the copy ends at \(offset) of \(bytes) bytes") }
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += Int64(n)
        }
        let digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        guard digest == sha256.lowercased() else {
            throw StoreError("verify", outPath, errno: EIO, detail: "the copy's sha256 is \(digest), the marker says \(sha256)")
        }
    }

    private func shortRead(at offset: Int64) -> StoreError {
        StoreError("read", partPath, errno: EIO, detail: "the staged file ends at \(offset) of its \(bytes) bytes")
    }
}
