import Foundation

/// Loops around read/write for short counts and EINTR: whole-file reads and writes on a
/// descriptor, used by `Directory`'s small files and by callers holding a descriptor of their own.
public enum FileIO {
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(StoreError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError("write", path)
            }
            done += n
        }
    }

    public static func readUpTo(_ fd: Int32, limit: Int, path: String) throws(StoreError) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while result.count < limit {
            let want = min(chunk.count, limit - result.count)
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, want) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError("read", path)
            }
            if n == 0 { break }
            result.append(contentsOf: chunk[0..<n])
        }
        return result
    }
}
