import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// The claimed request file the engine last read an item from, kept open for the next start.
///
/// An item's URL, name and headers are read back from its claimed file when it starts
/// (`ItemRecord.load`): opening the file for each start cost an `openat`, an `fstat` and a
/// `close` per item, on the engine thread. The items of a list start one after another, so one
/// kept descriptor saves those three calls for all but the first. It is one descriptor in all,
/// never one per claim (a claim still holds none of its own).
///
/// The kept file is read through a `RequestItemReader`, whose window serves the next items'
/// lines from memory: items starting in file order cost one `pread` per window, not one each.
///
/// Keyed by inode: while the slot holds the file open, no other file on that filesystem can
/// take its inode number, so a matching inode is the same claimed file. Engine thread only.
final class RequestFileSlot {
    private var fd: Int32 = -1
    private var inode: UInt64 = 0
    private var kept: RequestItemReader?

    /// A reader of `claim`'s file, valid until the next call or `release`.
    func reader(for claim: ClaimedRequest) throws(StoreError) -> RequestItemReader {
        if let kept, fd >= 0 && inode == claim.inode { return kept }
        if fd >= 0 { closeKept() }
        fd = try claim.openFile()
        inode = claim.inode
        let reader = RequestItemReader(fd: fd)
        kept = reader
        return reader
    }

    /// Closes the kept descriptor if it is `claim`'s (its request has ended).
    func release(_ claim: ClaimedRequest) {
        if fd >= 0 && inode == claim.inode { closeKept() }
    }

    /// Closes the kept descriptor, whichever file it is.
    func closeKept() {
        kept = nil
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { closeKept() }
}
