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
/// make the device or the server faster. Threads of their own rather than Dispatch's
/// `concurrentPerform`, which runs no wider than the number of cores.
enum FileSync {
    static let width = 4

    /// Syncs every target; the error of each one that failed, by index (nil: durable).
    static func fdatasyncAll(_ targets: [SyncTarget]) -> [StoreError?] {
        if targets.count <= 1 {
            return targets.map { fdatasync($0.fd) == 0 ? nil : StoreError("fdatasync", $0.path) }
        }
        let batch = SyncBatch(targets)
        let helpers = min(width, targets.count) - 1
        let finished = DispatchGroup()
        for _ in 0..<helpers {
            finished.enter()
            let thread = Thread {
                batch.work()
                finished.leave()
            }
            thread.stackSize = 64 * 1024
            thread.start()
        }
        batch.work()
        finished.wait()
        return batch.errors.withLock { $0 }
    }
}

/// The shared state of one `fdatasyncAll`: the next index to take and the errors so far.
private final class SyncBatch: Sendable {
    let targets: [SyncTarget]
    let next = Atomic<Int>(0)
    let errors: Mutex<[StoreError?]>

    init(_ targets: [SyncTarget]) {
        self.targets = targets
        errors = Mutex(Array(repeating: nil, count: targets.count))
    }

    func work() {
        while true {
            let i = next.wrappingAdd(1, ordering: .relaxed).oldValue
            guard i < targets.count else { return }
            if fdatasync(targets[i].fd) != 0 {
                let error = StoreError("fdatasync", targets[i].path)
                errors.withLock { $0[i] = error }
            }
        }
    }
}
