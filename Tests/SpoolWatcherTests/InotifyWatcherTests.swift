import Foundation
import Synchronization
import SpoolWatcher
import XCTest

/// The inotify watcher in this process. libinotifytools' state is process-global, so each test
/// stops its watcher and waits for `stopped` (watches removed, descriptor closed) before it ends;
/// the daemons of the end-to-end tests are processes of their own.
final class InotifyWatcherTests: XCTestCase {
    /// What the tests wait for, kept small: a full event log of 16,000 arrivals would make every
    /// look at it slow.
    struct Seen {
        var arrivals = 0
        var arrivedNames: Set<String> = []
        var overflowListing: [String]?
        var stopped = 0
        var failures: [String] = []
    }

    final class Recorder: Sendable {
        let seen = Mutex(Seen())
        let changed = DispatchSemaphore(value: 0)
        /// Holds the watcher thread inside its first delivery (the initial listing) until signalled.
        let gate = DispatchSemaphore(value: 0)
        let holdsFirstListing: Bool

        init(holdsFirstListing: Bool) { self.holdsFirstListing = holdsFirstListing }

        func record(_ event: WatcherEvent) {
            seen.withLock { seen in
                switch event {
                case .arrived(let name):
                    seen.arrivals += 1
                    if !name.hasPrefix("queued-") { seen.arrivedNames.insert(name) }
                case .listing(let names, let initial):
                    if !initial { seen.overflowListing = names }
                case .stopped: seen.stopped += 1
                case .failed(let why): seen.failures.append(why)
                default: break
                }
            }
            changed.signal()
            if holdsFirstListing, case .listing(_, initial: true) = event { gate.wait() }
        }

        func wait(_ what: String, timeout: Double = 30, until predicate: (Seen) -> Bool) {
            let deadline = Date().addingTimeInterval(timeout)
            while !seen.withLock({ predicate($0) }) {
                let remaining = deadline.timeIntervalSinceNow
                if remaining <= 0 || changed.wait(timeout: .now() + remaining) == .timedOut {
                    let now = seen.withLock { "arrivals \($0.arrivals), listing \($0.overflowListing?.count ?? -1), stopped \($0.stopped), failures \($0.failures)" }
                    return XCTFail("timed out after \(timeout) s waiting for \(what); \(now)")
                }
            }
        }
    }

    private var folder = ""

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "/spoolfetch-inotify-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/spool/incoming", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder + "/spool/control", withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func touch(_ path: String) {
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0, "open \(path): errno \(errno)")
        close(fd)
    }

    /// More files than the kernel queues events for (`max_queued_events`) land while the watcher
    /// thread is held: the kernel drops events and reports `IN_Q_OVERFLOW`. The watcher must list
    /// the folder (every file is in that listing) and go on delivering events afterwards.
    func testAnOverflowedEventQueueIsListedAndEventsFlowAgain() throws {
        let limitText = try String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8)
        let limit = try XCTUnwrap(Int(limitText.trimmingCharacters(in: .whitespacesAndNewlines)))
        guard limit <= 100_000 else { throw XCTSkip("max_queued_events is \(limit): too many files to make for an overflow") }
        let incoming = folder + "/spool/incoming"
        let recorder = Recorder(holdsFirstListing: true)
        let watcher = DirectoryWatcher(directory: incoming, controlDirectory: folder + "/spool/control") { recorder.record($0) }
        try watcher.start()

        let count = limit + 100
        for i in 0..<count { touch(incoming + "/queued-\(i)") }
        recorder.gate.signal()

        recorder.wait("the listing that follows the overflow") { $0.overflowListing != nil }
        let listed = Set(recorder.seen.withLock { $0.overflowListing ?? [] })
        XCTAssertEqual(listed.count, count, "every file is in the listing after the overflow")
        XCTAssertLessThan(recorder.seen.withLock { $0.arrivals }, count, "the kernel dropped events (no overflow happened)")

        touch(incoming + "/after")
        recorder.wait("an event after the overflow") { $0.arrivedNames.contains("after") }

        XCTAssertTrue(watcher.stop())
        recorder.wait("the watcher's end") { $0.stopped == 1 }
        XCTAssertEqual(recorder.seen.withLock { $0.failures }, [])
    }

    /// `stop()` wakes a watcher that waits for events with no rescans (it would otherwise wait
    /// for the next event forever), it reports `stopped` once, and a new watcher can be started
    /// in the same process afterwards and sees new files.
    func testStopWakesTheThreadAndANewWatcherCanFollow() throws {
        let incoming = folder + "/spool/incoming"
        for round in 0..<2 {
            let recorder = Recorder(holdsFirstListing: false)
            let watcher = DirectoryWatcher(directory: incoming, controlDirectory: folder + "/spool/control") { recorder.record($0) }
            try watcher.start()
            touch(incoming + "/round-\(round)")
            recorder.wait("round \(round)'s file") { $0.arrivedNames.contains("round-\(round)") }
            XCTAssertTrue(watcher.stop(), "the wake-up file could be made")
            recorder.wait("round \(round)'s stop") { $0.stopped == 1 }
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder + "/spool/control"), [],
                           "the wake-up file is removed")
            XCTAssertEqual(recorder.seen.withLock { $0.failures }, [])
        }
    }
}
