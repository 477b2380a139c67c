import Foundation
@testable import SpoolDaemon
import SpoolRequest
import SpoolStore
import XCTest

/// The I/O queue as a room test holds it: each job the room submits is kept, in order, and run
/// on the test's own thread when the test says — so a test sees what a room handed to the I/O
/// queue and when, and waits for nothing (no thread, no inbox, no sleep).
final class HeldIO: IOSubmitting {
    private var jobs: [@Sendable () -> EngineMessage] = []
    /// Jobs submitted and not run yet.
    var waiting: Int { jobs.count }

    func submit(_ work: @escaping @Sendable () -> EngineMessage) { jobs.append(work) }

    /// Runs the jobs submitted so far, oldest first, and returns their answers (what the engine
    /// would route after `IOQueue.answer`).
    func runAll() -> [EngineMessage] {
        let taken = jobs
        jobs = []
        return taken.map { $0() }
    }

    /// Drops the jobs submitted so far without running them.
    func discardAll() { jobs = [] }
}

/// The group hooks a `GroupEnds` asked for, instead of a hook runner.
final class RecordedGroupHooks: GroupHookStarting {
    struct Call {
        let journal: HeldLock
        let markerPath: String
        let group: String
        let request: String
        let items: Int
        let failed: Int
    }
    private(set) var calls: [Call] = []

    func groupEnded(journal: HeldLock, markerPath: String, group: String, request: String, items: Int, failed: Int,
                    owner: String?) {
        calls.append(Call(journal: journal, markerPath: markerPath, group: group, request: request, items: items, failed: failed))
    }
}

/// A spool in a fresh temporary folder, held by one worker, as the rooms' store: real files,
/// real renames and syncs.
final class TemporarySpool {
    let root: String
    let layout: SpoolLayout
    let store: SpoolStore

    init(_ label: String) throws {
        var template = Array((NSTemporaryDirectory() + "/spool\(label)-XXXXXX").utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        layout = try SpoolLayout(root: root)
        store = SpoolStore(layout: layout, worker: try WorkerFolder(layout: layout))
    }

    /// Drops a request file into `incoming/`, as a producer does.
    func drop(_ name: String, _ text: String) {
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(root)/incoming/\(name)", contents: Data(text.utf8)))
    }

    /// Drops, claims and records a request in `table` as intake would.
    func claimAndAdd(_ name: String, _ text: String, into table: ItemTable, now: Date = Date()) throws -> RequestRecord {
        drop(name, text)
        guard case .claimed(let claim) = try store.claim(name) else { throw XCTSkip("not claimed") }
        let fd = try claim.openFile()
        defer { close(fd) }
        let index = try RequestParser.index(fileName: claim.name, descriptor: fd)
        return table.add(claim: claim, index: index) { _ in ItemLifecycle(firstQueued: now) }
    }

    func names(in folder: String) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: "\(root)/\(folder)")) ?? [])
    }

    func json(_ path: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any], path)
    }

    func remove() {
        store.releaseWorkerFolder()
        try? FileManager.default.removeItem(atPath: root)
    }
}
