import Foundation

/// An entry of a directory listing with what `readdir` says it is.
struct DirectoryEntry {
    let name: String
    let isDirectory: Bool
    let isRegular: Bool
}

extension Directory {
    /// Names with their types, from one `readdir` pass. Where the filesystem does not report a
    /// type (DT_UNKNOWN, as some network filesystems do), it is found with `fstatat`.
    func entries() -> [DirectoryEntry] {
        let dupFD = dup(fd)
        guard dupFD >= 0, let dir = fdopendir(dupFD) else { return [] }
        defer { closedir(dir) }
        rewinddir(dir)
        var result: [DirectoryEntry] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name == "." || name == ".." { continue }
            var type = Int32(entry.pointee.d_type)
            if type == Int32(DT_UNKNOWN) {
                guard let st = status(of: name) else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: type = Int32(DT_DIR)
                case S_IFREG: type = Int32(DT_REG)
                default: type = Int32(DT_LNK)
                }
            }
            result.append(DirectoryEntry(name: name, isDirectory: type == Int32(DT_DIR), isRegular: type == Int32(DT_REG)))
        }
        return result
    }
}
