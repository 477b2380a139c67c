import Foundation
import SpoolfetchKit
import SpoolTestSupport
import XCTest

/// SpoolfetchKit against the real daemon: tasks written through a session, listed, cancelled,
/// and their endings delivered as an AsyncSequence that a restarted program resumes.
final class SpoolfetchKitTests: SpoolTestCase {
    /// Collects events until `done` holds for what was collected, with a deadline.
    private func collect(_ events: SpoolSessionEvents, timeout: Double,
                         until done: @escaping @Sendable ([SpoolSessionEvent]) -> Bool) async throws -> [SpoolSessionEvent] {
        try await withThrowingTaskGroup(of: [SpoolSessionEvent]?.self) { group in
            group.addTask {
                var got: [SpoolSessionEvent] = []
                for await event in events {
                    got.append(event)
                    if done(got) { return got }
                }
                return got
            }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))   // the deadline, not a synchronisation
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            guard let got = first else { throw WaitError.timedOut(what: "session events", after: timeout) }
            return got
        }
    }

    func testSessionTasksEndAsEventsThatSurviveARestart() async throws {
        let body = TestBody.random(count: 50_000, seed: 9)
        server.serve("/kit/a.bin", body: body, etag: "\"a\"")
        server.serve("/kit/gone", body: [], script: [.status(404)])
        server.acceptUploads("/kit/up")
        let session = SpoolSession(spool: URL(fileURLWithPath: spool.root))

        var request = SpoolTaskRequest(url: URL(string: server.url("/kit/a.bin"))!)
        request.countOfBytesClientExpectsToReceive = Int64(body.count)
        request.sha256 = TestBody.sha256Hex(body)
        request.priority = .high
        request.setValue("kit-test", forHTTPHeaderField: "X-Caller")
        request.group = "kit"
        let download = try session.downloadTask(with: request)
        let failing = try session.downloadTask(with: SpoolTaskRequest(url: URL(string: server.url("/kit/gone"))!))
        var later = SpoolTaskRequest(url: URL(string: server.url("/kit/a.bin?later"))!)
        later.earliestBeginDate = Date().addingTimeInterval(86_400)
        later.fileName = "later.bin"
        let postponed = try session.downloadTask(with: later)
        XCTAssertThrowsError(try session.downloadTask(with: SpoolTaskRequest(url: URL(string: "ftp://example.org/x")!)),
                             "refused as the daemon would, nothing written")
        let payload = spool.path("tmp", "payload")
        try Data("uploaded by the kit".utf8).write(to: URL(fileURLWithPath: payload))
        var put = SpoolTaskRequest(url: URL(string: server.url("/kit/up"))!)
        put.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        let upload = try session.uploadTask(with: put, fromFile: URL(fileURLWithPath: payload))
        XCTAssertEqual(upload.kind, .upload)
        XCTAssertEqual(try session.allTasks().map(\.taskIdentifier).sorted(),
                       [download, failing, postponed, upload].map(\.taskIdentifier).sorted(), "queued, not claimed yet")

        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root])
        defer { daemon.terminate() }

        // First run of the program: it handles the first two endings, stores the cursor, "crashes".
        let firstRun = try await collect(try session.events(), timeout: 60) { $0.count >= 2 }
        let cursor = try XCTUnwrap(firstRun.prefix(2).last?.cursor)
        // The postponed task waits for its start: listed with its state, then cancelled.
        let id = postponed.taskIdentifier + "#0"
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "\(id) waiting to start") {
            (try? session.allTasks().first { $0.taskIdentifier == id }?.state) == "waiting-start"
        }
        try session.cancel(postponed.taskIdentifier)

        // Second run: a new session on the same spool, from the stored cursor.
        let restarted = SpoolSession(spool: URL(fileURLWithPath: spool.root))
        let requests = [download, failing, postponed, upload].map(\.taskIdentifier)
        let secondRun = try await collect(try restarted.events(after: cursor), timeout: 60) { got in
            let groups = (firstRun.prefix(2) + got).filter { if case .didFinishEvents = $0.kind { return true } else { return false } }
            return Set(groups.map(\.taskIdentifier)).isSuperset(of: requests)
        }
        let all = Array(firstRun.prefix(2)) + secondRun
        XCTAssertEqual(all.map(\.cursor).count, Set(all.map(\.cursor)).count, "nothing twice")
        // In order: by the records' ctimes, the cursor's first field.
        let times = all.map { Int64($0.cursor.split(separator: ":")[0]) ?? -1 }
        XCTAssertTrue(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 }, "in order: \(all.map(\.cursor))")
        // Every task's ending, and each group's, exactly once.
        func ending(_ id: String) -> [SpoolSessionEvent.Kind] { all.filter { $0.taskIdentifier == id }.map(\.kind) }
        guard case .didFinishDownloadingTo(let location) = try XCTUnwrap(ending(download.taskIdentifier + "#0").first) else {
            return XCTFail("download: \(ending(download.taskIdentifier + "#0"))")
        }
        XCTAssertEqual(try Data(contentsOf: location), Data(body))
        XCTAssertEqual(ending(download.taskIdentifier + "#0").count, 1)
        guard case .didCompleteWithError(let error) = try XCTUnwrap(ending(failing.taskIdentifier + "#0").first) else {
            return XCTFail("failing: \(ending(failing.taskIdentifier + "#0"))")
        }
        XCTAssertEqual(error.code, "http-status")
        guard case .didCompleteWithError(let cancelled) = try XCTUnwrap(ending(postponed.taskIdentifier + "#0").first) else {
            return XCTFail("postponed: \(ending(postponed.taskIdentifier + "#0"))")
        }
        XCTAssertEqual(cancelled.code, "cancelled")
        guard case .didFinishUploading = try XCTUnwrap(ending(upload.taskIdentifier + "#0").first) else {
            return XCTFail("upload: \(ending(upload.taskIdentifier + "#0"))")
        }
        XCTAssertEqual(server.uploads(at: "/kit/up"), [Array("uploaded by the kit".utf8)])
        XCTAssertEqual(server.requests(for: "/kit/a.bin").first?.header("X-Caller"), "kit-test")
        for request in requests { XCTAssertEqual(ending(request).count, 1, "one group ending for \(request)") }
        XCTAssertEqual(all.first { $0.taskIdentifier == download.taskIdentifier }?.group, "kit")
    }
}
