import Foundation
import Synchronization

/// One file to make durable: its open descriptor and, for the error message, its path.
struct SyncTarget: Sendable {
    var fd: Int32
    var path: String
}

/// `fdatasync` of many files from a few threads at once.
///
/// Where `syncfs` cannot be trusted (FUSE, NFS), every file of a batch needs its own
/// `fdatasync`. One after the other, a batch of small files waits for one device flush (or
/// server round trip) per file; a few in flight at once overlap those waits, so small files stay
/// fast. Only a few threads (`width`): each one just waits on a flush, and more of them do not
/// make the device or the server faster.
enum FileSync {
    static let width = 4

    /// Syncs every target; the error of each one that failed, by index (nil: durable).
    static func fdatasyncAll(_ targets: [SyncTarget]) -> [StoreError?] {
        let errors = Mutex<[StoreError?]>(Array(repeating: nil, count: targets.count))
        FewThreads.forEach(targets.count, width: width) { i in
            if fdatasync(targets[i].fd) != 0 {
                let error = StoreError("fdatasync", targets[i].path)
                errors.withLock { $0[i] = error }
            }
        }
        return errors.withLock { $0 }
    }
}

/// Runs a blocking call for each index on a few threads at once, the caller's among them, and
/// returns when every index is done.
///
/// For calls that mostly wait on the device (a flush, the discard of a removed file's blocks):
/// their waits overlap. Threads of their own rather than Dispatch's `concurrentPerform`, which
/// runs no wider than the number of cores.
enum FewThreads {
    /// `body(i)` once for every `i` in `0..<count`, from up to `width` threads.
    static func forEach(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) -> Void) {
        if count <= 1 || width <= 1 {
            for i in 0..<count { body(i) }
            return
        }
        let indexes = SharedIndexes(count)
        let helpers = min(width, count) - 1
        let finished = DispatchGroup()
        for _ in 0..<helpers {
            finished.enter()
            let thread = Thread {
                indexes.drain(body)
                finished.leave()
            }
            thread.stackSize = 64 * 1024
            thread.start()
        }
        indexes.drain(body)
        finished.wait()
    }
}

/// The next index to take, shared by the threads of one `FewThreads.forEach`.
private final class SharedIndexes: Sendable {
    let count: Int
    let next = Atomic<Int>(0)

    init(_ count: Int) { self.count = count }

    func drain(_ body: (Int) -> Void) {
        while true {
            let i = next.wrappingAdd(1, ordering: .relaxed).oldValue
            guard i < count else { return }
            body(i)
        }
    }
}
