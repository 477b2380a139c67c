import Foundation

/// A part a running daemon holds open in its staging folder, read through `/proc/PID/fd`: how a
/// test sees a small body's part, which has no name in `staging/` until it is published or kept
/// for later (`UnnamedPartSupport`).
public struct OpenPart {
    public var inode: UInt64
    public var size: Int64
    /// No name in the folder (`/proc` shows `FOLDER/#INODE (deleted)`).
    public var isUnnamed: Bool
    /// Its name in the folder; nil when it has none.
    public var name: String? = nil
}

extension DaemonProcess {
    /// The parts (named `*.part`, or unnamed) this daemon has open in `staging`; journals and
    /// other files there are left out. Empty once the process is gone.
    public func openParts(in staging: String) -> [OpenPart] {
        let folder = (staging as NSString).resolvingSymlinksInPath + "/"
        let descriptors = "/proc/\(pid)/fd"
        var parts: [OpenPart] = []
        for fd in (try? FileManager.default.contentsOfDirectory(atPath: descriptors)) ?? [] {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: descriptors + "/" + fd),
                  target.hasPrefix(folder) else { continue }
            let name = target.dropFirst(folder.count)
            let unnamed = name.hasPrefix("#") && name.hasSuffix(" (deleted)")
            guard unnamed || name.hasSuffix(".part") else { continue }
            var st = stat()
            guard stat(descriptors + "/" + fd, &st) == 0 else { continue }
            parts.append(OpenPart(inode: UInt64(st.st_ino), size: Int64(st.st_size), isUnnamed: unnamed,
                                  name: unnamed ? nil : String(name)))
        }
        return parts
    }
}
