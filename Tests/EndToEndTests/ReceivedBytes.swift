import Foundation
import SpoolTestSupport

extension SpoolTestCase {
    /// Bytes received so far: the parts `daemon` holds open (named or not), parts in `staging/`
    /// and published files in `final/`, once per inode — listed in that order, so a part that
    /// moves meanwhile is caught in the later listing. `counts` picks parts by their name in
    /// `staging/` (nil for an unnamed part) and published files by theirs (see
    /// `RateEndToEndTests` for why the spool is where a rate is measured).
    func receivedBytes(daemon: DaemonProcess, part counts: (String?) -> Bool = { _ in true },
                       published: (String) -> Bool = { _ in true }) -> Int64 {
        var sizes: [UInt64: Int64] = [:]
        for part in daemon.openParts(in: spool.path("staging")) where counts(part.name) { sizes[part.inode] = part.size }
        for name in spool.files(in: "staging") where name.hasSuffix(".part") && counts(name) {
            if let (inode, size) = fileStatus(spool.path("staging", name)) { sizes[inode] = size }
        }
        for name in spool.files(in: "final") where !name.hasPrefix(".") && !name.hasSuffix(".done") && published(name) {
            if let (inode, size) = fileStatus(spool.path("final", name)) { sizes[inode] = size }
        }
        return sizes.values.reduce(0, +)
    }

    private func fileStatus(_ path: String) -> (UInt64, Int64)? {
        var st = stat()
        return stat(path, &st) == 0 ? (UInt64(st.st_ino), Int64(st.st_size)) : nil
    }
}
