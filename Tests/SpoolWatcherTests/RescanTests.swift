import Foundation
import Synchronization
import SpoolWatcher
import XCTest

/// The watcher without inotify (a shared filesystem written from other machines): rescans
/// deliver what lands in the folder, and a folder that vanishes is reported, made again and
/// listed. (The inotify mode is process-global, so it is tested end to end, in the daemon.)
final class RescanTests: XCTestCase {
    /// Events as they arrive, and a semaphore signalled for each, to wait on them with a deadline.
    final class Recorder: Sendable {
        let events = Mutex<[WatcherEvent]>([])
        let arrived = DispatchSemaphore(value: 0)

        func record(_ event: WatcherEvent) {
            events.withLock { $0.append(event) }
            arrived.signal()
        }
    }

    private var folder = ""

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "/spoolfetch-rescan-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/spool/incoming", withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func waitFor(_ recorder: Recorder, _ what: String, timeout: Double = 10,
                         until predicate: @escaping ([WatcherEvent]) -> Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        while !recorder.events.withLock({ predicate($0) }) {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 || recorder.arrived.wait(timeout: .now() + remaining) == .timedOut {
                return XCTFail("timed out after \(timeout) s waiting for \(what); events: \(recorder.events.withLock { $0 })")
            }
        }
    }

    private func drop(_ name: String, into dir: String) throws {
        let temp = folder + "/." + name + ".tmp"
        XCTAssertTrue(FileManager.default.createFile(atPath: temp, contents: Data("http://h/\(name)\n".utf8)))
        XCTAssertEqual(rename(temp, dir + "/" + name), 0)
    }

    func testRescansAloneDeliverNewFilesAndRecoverAVanishedFolder() throws {
        let incoming = folder + "/spool/incoming"
        try drop("before", into: incoming)
        let recorder = Recorder()
        let watcher = DirectoryWatcher(directory: incoming, rescanInterval: 0.1, usesInotify: false) { recorder.record($0) }
        try watcher.start()
        defer { watcher.stop() }
        waitFor(recorder, "the initial listing") { $0.first == .listing(["before"], initial: true) }

        try drop("later", into: incoming)
        waitFor(recorder, "a rescan with the new file") { $0.contains { if case .rescanned(let n) = $0 { n.contains("later") } else { false } } }

        try FileManager.default.removeItem(atPath: incoming)
        waitFor(recorder, "the folder's loss") { $0.contains { if case .folderLost(let f, _) = $0 { f == incoming } else { false } } }
        var isDirectory: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: incoming, isDirectory: &isDirectory) && isDirectory.boolValue)
        try drop("after", into: incoming)
        waitFor(recorder, "a rescan of the new folder") { $0.contains { if case .rescanned(let n) = $0 { n.contains("after") } else { false } } }
        XCTAssertFalse(recorder.events.withLock { $0 }.contains { if case .failed = $0 { true } else { false } })
    }

    func testWithoutInotifyARescanIntervalIsRequired() {
        let watcher = DirectoryWatcher(directory: folder + "/spool/incoming", usesInotify: false) { _ in }
        XCTAssertThrowsError(try watcher.start()) { error in
            XCTAssertTrue("\(error)".contains("rescan interval"), "\(error)")
        }
    }
}
