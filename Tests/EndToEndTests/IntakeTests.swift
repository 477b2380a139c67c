import Foundation
import SpoolTestSupport
import XCTest

/// Intake takes every complete file: a request hard-linked into `incoming/` (Maildir's delivery,
/// which inotify reports only as IN_CREATE) is fetched at once, and what is not a regular file
/// is rejected with its reason at once, never opened, never left `queued`.
final class IntakeTests: SpoolTestCase {
    func testHardLinkedRequestIsTakenAtOnceAndOtherFileTypesAreRejectedWithTheirReason() throws {
        let body = TestBody.random(count: 30_000, seed: 4901)
        server.serve("/linked", body: body)
        // The producer's own folder on the spool's filesystem (Maildir's tmp/).
        let producer = spool.root + "/producer-tmp"
        try FileManager.default.createDirectory(atPath: producer, withIntermediateDirectories: true)
        // No rescans: only inotify can bring these names in.
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--rescan-interval", "0"])
        defer { daemon.terminate() }
        try daemon.waitForStderr(containing: "spoolfetch running", timeout: 30)

        XCTAssertTrue(FileManager.default.createFile(atPath: producer + "/linked", contents: Data((server.url("/linked") + "\n").utf8)))
        XCTAssertEqual(link(producer + "/linked", spool.path("incoming", "linked")), 0, String(cString: strerror(errno)))
        XCTAssertEqual(unlink(producer + "/linked"), 0)
        try DirectoryWaiter.waitForFile("linked.done", in: spool.path("final"), timeout: 15)
        XCTAssertEqual(try spool.read("final", "linked"), body)

        // A FIFO with a writer blocked in open(): had the daemon opened it for reading, the
        // writer's open would return.
        XCTAssertEqual(mkfifo(producer + "/pipe", 0o644), 0)
        let writerOpened = Atomic(false)
        let writerDone = DispatchSemaphore(value: 0)
        let pipePath = producer + "/pipe"
        Thread.detachNewThread {
            let fd = open(pipePath, O_WRONLY | O_CLOEXEC)
            if fd >= 0 { writerOpened.set(true); close(fd) }
            writerDone.signal()
        }
        XCTAssertEqual(link(producer + "/pipe", spool.path("incoming", "pipe")), 0)
        XCTAssertEqual(mkdir(spool.path("incoming", "folder"), 0o755), 0)
        XCTAssertEqual(symlink(spool.path("final", "linked"), spool.path("incoming", "link")), 0)
        XCTAssertEqual(mknod(spool.path("incoming", "device"), S_IFCHR | 0o600, dev_t((1 << 8) | 3)), 0,
                       "mknod needs root, as make test runs: \(String(cString: strerror(errno)))")

        let expected = ["pipe": "FIFO", "folder": "directory", "link": "symbolic link", "device": "character device"]
        for (name, reason) in expected {
            try DirectoryWaiter.waitForFile(name + ".error", in: spool.path("rejected"), timeout: 15)
            let record = try json("rejected", name + ".error")
            let message = record["message"] as? String ?? ""
            XCTAssertTrue(message.contains(reason), "\(name): \(record)")
            XCTAssertEqual(record["code"] as? String, name == "link" ? "symlink" : "not-regular-file", "\(name): \(record)")
            var st = stat()
            XCTAssertEqual(lstat(spool.path("rejected", name), &st), 0, "\(name) is filed in rejected/")
        }
        XCTAssertFalse(writerOpened.get(), "the daemon opened the FIFO for reading")
        XCTAssertEqual(spool.files(in: "incoming"), [], "nothing is left in incoming/ to show as queued")
        XCTAssertEqual(try spool.read("final", "linked"), body, "the symlink's target is untouched")

        // Let the blocked writer go: open the FIFO for reading ourselves.
        let reader = open(spool.path("rejected", "pipe"), O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(reader, 0)
        XCTAssertEqual(writerDone.wait(timeout: .now() + 10), .success)
        if reader >= 0 { close(reader) }
        XCTAssertTrue(daemon.stderrText.contains("not a regular file but a FIFO"), daemon.stderrText)
    }
}

/// A flag shared with a thread.
private final class Atomic: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Bool
    init(_ value: Bool) { self.value = value }
    func set(_ new: Bool) { lock.lock(); value = new; lock.unlock() }
    func get() -> Bool { lock.lock(); defer { lock.unlock() }; return value }
}
