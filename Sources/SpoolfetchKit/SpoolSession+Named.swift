import Foundation
import SpoolClient
import SpoolStore

// Tasks a program names itself. A program that adds a task and then saves its identifier can be
// killed between the two: started again, it adds the task a second time. A name the program
// derives from what it wants (its job's name, the file's digest) makes adding idempotent: the
// request file is named so, and asking again finds it, queued, claimed or ended, instead of
// writing another. And a program started again after its task's group ended finds that ending
// on the spool (`endedGroup(of:)`) rather than waiting for an event it already had.

extension SpoolSession {
    /// The download task named `name` (a plain file name: no `/`, no leading `.`): written if the
    /// spool has no request of that name yet, else the one it has — queued, held by a daemon (as
    /// the claim named it: `NAME~N` when an older ended `NAME` held the name), or ended. Calling
    /// it again, in the same run or after a restart, never adds a second task.
    @discardableResult
    public func downloadTask(with request: SpoolTaskRequest, named name: String) throws(SpoolSessionError) -> SpoolTask {
        if let problem = RequestWriter.nameProblem(name) {
            throw .refused("task name '\(name)': \(problem)")
        }
        if let found = task(named: name) { return SpoolTask(taskIdentifier: found, originalURL: request.url, kind: .download) }
        do {
            let written = try RequestWriter.add(request.addRequest(), spool: spool.path, finalFolder: finalFolder.path, named: name)
            return SpoolTask(taskIdentifier: written, originalURL: request.url, kind: .download)
        } catch {
            // Another process of the program wrote it between the look and the write.
            if case .spool(let e) = error, e.errno == EEXIST, let found = task(named: name) {
                return SpoolTask(taskIdentifier: found, originalURL: request.url, kind: .download)
            }
            throw .refused(error.description)
        }
    }

    /// The identifier the task named `name` has on the spool now (`NAME`, or `NAME~N` once a
    /// claim renamed it); nil when the spool has no request of that name.
    public func task(named name: String) -> String? {
        let target = RequestName.newest(name, spool: spool.path, finalFolder: finalFolder.path)
        if target.queuedInode != nil { return target.name ?? name }
        return target.name
    }

    /// How the task's group ended, read from its group marker (and its items' markers); nil while
    /// it is open (or unknown). For a program started again after the ending it waited for: its
    /// stored cursor is past that ending, so `events(after:)` would wait for a new one.
    public func endedGroup(of taskIdentifier: String) -> SpoolGroupEnding? {
        let path = RequestWriter.groupMarkerPath(of: taskIdentifier, spool: spool.path, finalFolder: finalFolder.path)
        guard let data = FileManager.default.contents(atPath: path),
              let marker = try? JSONDecoder().decode(GroupMarker.self, from: data) else { return nil }
        let items = marker.items.map { line -> SpoolGroupEnding.Item in
            var item = SpoolGroupEnding.Item(taskIdentifier: "\(marker.request)#\(line.index)", outcome: line.outcome)
            if let file = line.file, line.outcome != "failed" {
                item.location = finalFolder.appendingPathComponent(file)
                item.sha256 = line.sha256
                if item.sha256 == nil, let name = line.marker,
                   let bytes = FileManager.default.contents(atPath: finalFolder.appendingPathComponent(name).path) {
                    item.sha256 = (try? JSONDecoder().decode(ItemMarker.self, from: bytes))?.sha256
                }
            }
            if let code = line.code {
                item.error = SpoolTaskError(code: code, message: line.message ?? "")
                item.error?.cause = line.cause
            }
            return item
        }
        return SpoolGroupEnding(taskIdentifier: marker.request, published: marker.published, failed: marker.failed,
                                marker: URL(fileURLWithPath: path), items: items)
    }
}

/// A task's group as it ended (see `SpoolSession.endedGroup(of:)`).
public struct SpoolGroupEnding: Sendable, Hashable {
    public struct Item: Sendable, Hashable {
        /// `REQUEST#INDEX`.
        public let taskIdentifier: String
        /// `published`, `unchanged`, `uploaded` or `failed`.
        public let outcome: String
        /// The published (or confirmed) file in the final folder.
        public var location: URL?
        public var sha256: String?
        public var error: SpoolTaskError?

        init(taskIdentifier: String, outcome: String) {
            self.taskIdentifier = taskIdentifier
            self.outcome = outcome
        }
    }

    public let taskIdentifier: String
    public let published: Int
    public let failed: Int
    /// The group marker.
    public let marker: URL
    public let items: [Item]
}
