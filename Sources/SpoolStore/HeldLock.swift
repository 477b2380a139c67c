import Foundation

/// An open file whose `flock` this process holds for as long as the object lives (closing the
/// descriptor in deinit releases it). Used for the files that say "my writer is alive": batch
/// journals, group journals, the workers' registration. Its own type (not a `Directory` detail):
/// the lock outlives the call that took it, and its owner decides how long it is held.
public final class HeldLock: @unchecked Sendable {
    /// The file's name in its folder.
    public let name: String
    let fd: Int32

    init(name: String, fd: Int32) {
        self.name = name
        self.fd = fd
    }

    deinit { close(fd) }
}
