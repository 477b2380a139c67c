internal import CLinux
import Foundation
import Synchronization

/// Whether a fresh part can start without a name: an `O_TMPFILE` file on the staging filesystem,
/// linked straight into the final folder when it is published.
///
/// Why: a named part costs a directory entry in `staging/` at its create and a two-folder rename
/// when it is published (both folders locked, the entry looked up and removed in one, added in the
/// other). For a batch of small files those two are the largest kernel costs of the daemon
/// (Benchmarks/RESULTS.md has the profile). An
/// unnamed part is created without an entry and published with one `linkat`, which adds the
/// final name and fails with EEXIST rather than replace: the same guarantee as the no-replace
/// rename. A consumer still never sees a partial file.
///
/// What an unnamed part gives up is being found after a crash: it vanishes with the process.
/// So a part gets its staging name (`SpoolStore.name`) as soon as it is worth resuming — when its
/// body is announced as large, and whenever the daemon records it as resumable (a `.state` file:
/// on stop, pause, a retry or a full disk). A crash then loses at most the first bytes of a body
/// announced as small, which the next start downloads again.
///
/// Supported where staging and the final folder share a filesystem with `O_TMPFILE` (ext4, xfs,
/// btrfs, tmpfs) and `/proc` is mounted or the kernel lets the process link with `AT_EMPTY_PATH`
/// (`spoolfetch_link_open_file`); found once by a probe (`probe`), else every part is named from
/// its creation.
final class UnnamedPartSupport: Sendable {
    /// 0: not probed yet; 1: supported; 2: not supported.
    private let state = Atomic<UInt8>(0)

    /// Whether fresh parts may start unnamed in `layout` (probed on the first call).
    func isSupported(in layout: SpoolLayout) -> Bool {
        switch state.load(ordering: .relaxed) {
        case 1: return true
        case 2: return false
        default:
            let supported = Self.probe(staging: layout.staging, final: layout.final)
            state.store(supported ? 1 : 2, ordering: .relaxed)
            return supported
        }
    }

    /// Creates an unnamed file in `staging`, links it into `final` as a throw-away dotfile
    /// (`.spoolfetch-probe-*.tmp`, ignored by consumers and swept at start) and removes that.
    static func probe(staging: Directory, final: Directory) -> Bool {
        guard staging.deviceID() == final.deviceID() else { return false }
        let fd = spoolfetch_open_unnamed(staging.fd)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let name = ".spoolfetch-probe-\(getpid())-\(UInt32.random(in: 0 ... .max))-u.tmp"
        guard spoolfetch_link_open_file(fd, final.fd, name) == 0 else { return false }
        final.remove(name)
        return true
    }
}
