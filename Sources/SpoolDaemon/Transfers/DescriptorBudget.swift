import Foundation
import SpoolCore

/// How many items may hold a staging file open at once, from the process's open-file limit.
///
/// An item holds its `staging/B.part` open from the start of an attempt until the publisher is
/// done with it: while it runs (with a connection or two beside it) and while it waits, verified,
/// for a publish batch (with its marker's temp file beside it while the batch runs). When the
/// disk publishes slower than the network delivers — thousands of tiny files, a slow `syncfs` —
/// verified items pile up; without a bound they would use up the open-file limit, and every
/// open after that (a request file, a staging file, a journal) would fail with EMFILE.
///
/// So the engine starts a transfer only while `running + publishing < openItems`: a disk that
/// falls behind slows the downloads down instead of failing them. The limit is the soft
/// `RLIMIT_NOFILE` as found (1,024 under a default systemd unit; the shipped unit raises it).
/// The daemon does not raise its own soft limit: its hooks would inherit the raised value, and
/// programs that still use `select()` break above 1,024.
struct DescriptorBudget: Equatable {
    /// Kept for everything else: journals, the status and control folders, inotify, libcurl's
    /// own (resolver, wake-up pipe), hook pipes, the I/O queue's sync threads.
    static let reserve = 256
    /// The most one item holds: its part plus two connections (happy eyeballs tries IPv6 and
    /// IPv4 at once), or its part plus its marker's temp file during a publish batch.
    static let perItem = 3
    /// Never fewer than this, even under a tiny limit: the daemon must still make progress.
    static let minimumItems = 8

    /// The soft open-file limit the budget was made from.
    let limit: Int
    /// Items that may hold a staging file open at once (running plus waiting to be published).
    let openItems: Int

    init(limit: Int) {
        self.limit = limit
        openItems = max(Self.minimumItems, (limit - Self.reserve) / Self.perItem)
    }

    /// The budget of this process (its soft `RLIMIT_NOFILE`; unlimited counts as 1,048,576).
    static func ofThisProcess() -> DescriptorBudget {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return DescriptorBudget(limit: 1024) }
        let soft = limit.rlim_cur == rlim_t.max ? 1 << 20 : Int(clamping: limit.rlim_cur)
        return DescriptorBudget(limit: soft)
    }

    /// New transfers that may start now, with `open` items already holding a staging file.
    func starts(withOpen open: Int) -> Int { max(0, openItems - open) }
}
