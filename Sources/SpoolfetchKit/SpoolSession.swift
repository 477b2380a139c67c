import Foundation
import SpoolClient
import SpoolStore

/// A background `URLSession` for Linux: a session on a spool that hands download and upload
/// tasks to the spoolfetch daemon and delivers their endings as an `AsyncSequence`.
///
/// **The spool is the state.** A task is a request file the session writes into `incoming/`;
/// its ending is a marker (or error file) the daemon writes. The session itself holds nothing:
/// a program that restarts makes a new session on the same spool and asks for the events after
/// the last `cursor` it handled, and gets every ending it has not seen — including those that
/// happened while it was down — exactly once. Where the shapes differ from `URLSession`'s, the
/// README ("SpoolfetchKit") says why.
public struct SpoolSession: Sendable {
    public let spool: URL
    public let finalFolder: URL

    /// A session on `spool` (a folder with `incoming/`); `finalFolder` when the daemon's
    /// `--final-folder` is not `SPOOL/final`.
    public init(spool: URL, finalFolder: URL? = nil) {
        self.spool = spool.standardizedFileURL
        self.finalFolder = finalFolder?.standardizedFileURL ?? self.spool.appendingPathComponent("final")
    }

    /// Writes a download task into the spool; the daemon starts it when it is due. Unlike
    /// `URLSession`, there is no `resume()`: a request file once written is the task, started
    /// (there is nothing in the session's memory that could wait for a `resume`).
    @discardableResult
    public func downloadTask(with request: SpoolTaskRequest) throws(SpoolSessionError) -> SpoolTask {
        try write(request.addRequest(), url: request.url, kind: .download)
    }

    /// Sends `file` to the request's URL (`PUT` unless `request.httpMethod` says `POST`). The file
    /// is copied into the spool's `outgoing/` first (nothing outside it is ever sent), so the
    /// caller may change or remove it at once.
    @discardableResult
    public func uploadTask(with request: SpoolTaskRequest, fromFile file: URL) throws(SpoolSessionError) -> SpoolTask {
        let name = RequestWriter.uniqueName() + "-" + file.lastPathComponent.filter { $0 != "/" }
        let scratch = spool.appendingPathComponent("tmp/.\(name).tmp")
        let target = spool.appendingPathComponent("outgoing/\(name)")
        do {
            try FileManager.default.copyItem(at: file, to: scratch)
            guard rename(scratch.path, target.path) == 0 else {
                let code = errno
                try? FileManager.default.removeItem(at: scratch)
                throw SpoolSessionError.io("rename \(scratch.path) → \(target.path): \(String(cString: strerror(code)))")
            }
        } catch let error as SpoolSessionError {
            throw error
        } catch {
            throw .io("copy \(file.path) into \(target.path): \(error.localizedDescription)")
        }
        var add = request.addRequest()
        add.upload = name
        add.method = request.httpMethod
        add.contentType = request.value(forHTTPHeaderField: "Content-Type")
        add.headers.removeAll { $0.lowercased().hasPrefix("content-type:") }
        do {
            return try write(add, url: request.url, kind: .upload)
        } catch {
            try? FileManager.default.removeItem(at: target)
            throw error
        }
    }

    private func write(_ add: AddRequest, url: URL, kind: SpoolTask.Kind) throws(SpoolSessionError) -> SpoolTask {
        do {
            let name = try RequestWriter.add(add, spool: spool.path)
            return SpoolTask(taskIdentifier: name, originalURL: url, kind: kind)
        } catch {
            throw .refused(error.description)
        }
    }

    /// Every open task the spool's daemons report, and requests still queued (`getAllTasks`).
    /// Ended items are not listed: their endings come as events.
    public func allTasks() throws(SpoolSessionError) -> [SpoolTaskInfo] {
        do {
            return try SpoolOverview.read(spool: spool.path).tasks
                .filter { $0.state != "done" && $0.state != "failed" }
                .map(SpoolTaskInfo.init)
        } catch {
            throw .io(error.description)
        }
    }

    /// Cancels a task (`REQUEST`) or one item of it (`REQUEST#INDEX`): it ends failed with the
    /// code `cancelled`, which comes as a `didCompleteWithError` event.
    public func cancel(_ taskIdentifier: String) throws(SpoolSessionError) {
        do {
            _ = try ControlClient.send(.cancel, id: taskIdentifier, spool: spool.path)
        } catch {
            throw .refused(error.description)
        }
    }

    /// The endings after `cursor` (nil: from the first the spool holds), in order, then each as
    /// it happens. Store each event's `cursor` once it is handled, and pass it here after a
    /// restart. The sequence ends when the task iterating it is cancelled.
    public func events(after cursor: String? = nil) throws(SpoolSessionError) -> SpoolSessionEvents {
        var since: EventCursor?
        if let cursor {
            guard let parsed = EventCursor(cursor) else { throw .refused(EventError.badCursor(cursor).description) }
            since = parsed
        }
        do {
            let reader = try SpoolEventReader(spool: spool.path, finalFolder: finalFolder.path, since: since, follow: true)
            return SpoolSessionEvents(reader: reader)
        } catch {
            throw .io(error.description)
        }
    }

    /// Blocks until each task's group has ended (what `spoolfetch wait` does); for scripts and
    /// the command line. Each ending is passed to `ended` as it is found.
    public func wait(for taskIdentifiers: [String], timeout: TimeInterval?,
                     ended: (RequestWaiter.Ending) -> Void = { _ in }) throws(SpoolSessionError) -> RequestWaiter.Result {
        do {
            return try RequestWaiter.wait(for: taskIdentifiers, spool: spool.path, finalFolder: finalFolder.path,
                                          deadline: timeout.map { Date().addingTimeInterval($0) }, ended: ended)
        } catch {
            if case .unknown = error { throw .unknownTask(error.description) }
            throw .io(error.description)
        }
    }
}

/// What to fetch or send: `URLRequest`'s fields plus `URLSessionTask`'s scheduling ones, since
/// the request file carries both.
public struct SpoolTaskRequest: Sendable {
    public var url: URL
    /// Extra request headers (`allHTTPHeaderFields`); `Range`/`If-Range` are the daemon's.
    public var allHTTPHeaderFields: [String: String] = [:]
    /// `PUT` (default) or `POST`, uploads only.
    public var httpMethod: String?
    /// Not started before this time (`URLSessionTask.earliestBeginDate`).
    public var earliestBeginDate: Date?
    /// Best-guess size (`URLSessionTask.countOfBytesClientExpectsToReceive`): disk reservation,
    /// ordering, progress, and a sanity bound (2 ×, the daemon's `--expect-slack`).
    public var countOfBytesClientExpectsToReceive: Int64?
    /// A hard cap on the body; a larger one fails the task with `too-large`.
    public var maximumBytes: Int64?
    public var priority: SpoolTaskPriority = .normal
    /// Runs only inside the daemon's discretionary window (`isDiscretionary`).
    public var isDiscretionary = false
    /// The expected SHA-256 (hex); a mismatch publishes nothing and fails the task.
    public var sha256: String?
    /// The file's name in the final folder (default: the URL path's last segment).
    public var fileName: String?
    /// The group (default: the task's identifier): its `didFinishEvents` comes once all its
    /// tasks have ended.
    public var group: String?

    public init(url: URL) { self.url = url }

    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        allHTTPHeaderFields = allHTTPHeaderFields.filter { $0.key.lowercased() != field.lowercased() }
        if let value { allHTTPHeaderFields[field] = value }
    }

    public func value(forHTTPHeaderField field: String) -> String? {
        allHTTPHeaderFields.first { $0.key.lowercased() == field.lowercased() }?.value
    }

    func addRequest() -> AddRequest {
        var add = AddRequest(url: url.absoluteString)
        add.name = fileName
        add.earliestStart = earliestBeginDate.map { date in
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime]
            return formatter.string(from: date)
        }
        add.expectedBytes = countOfBytesClientExpectsToReceive.map(String.init)
        add.maxBytes = maximumBytes.map(String.init)
        add.sha256 = sha256
        add.priority = priority == .normal ? nil : priority.rawValue
        add.discretionary = isDiscretionary
        add.group = group
        add.headers = allHTTPHeaderFields.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        return add
    }
}

/// Three levels, as the daemon schedules them (`URLSessionTask.priority` is a Float whose
/// `lowPriority`, `defaultPriority`, `highPriority` map onto these).
public enum SpoolTaskPriority: String, Sendable {
    case low, normal, high

    /// From `URLSessionTask`'s Float scale: below 0.5 low, above 0.5 high.
    public init(_ value: Float) { self = value < 0.5 ? .low : value > 0.5 ? .high : .normal }
}

/// A task written into the spool.
public struct SpoolTask: Sendable, Hashable {
    public enum Kind: Sendable, Hashable { case download, upload }
    /// The request file's name (`URLSessionTask.taskIdentifier` is an Int that means nothing
    /// after a restart; this name is what the daemon, `status` and the events use).
    public let taskIdentifier: String
    public let originalURL: URL
    public let kind: Kind
}

/// An open task as the daemon reports it.
public struct SpoolTaskInfo: Sendable, Hashable {
    /// `REQUEST#INDEX` (an item a daemon holds) or `REQUEST` (queued, not claimed yet).
    public let taskIdentifier: String
    /// `queued`, `pending`, `waiting-start`, `waiting-window`, `waiting-space`, `running`,
    /// `retrying`, `paused`, `publishing`.
    public let state: String
    public let url: String
    public let countOfBytesReceived: Int64
    public let countOfBytesExpectedToReceive: Int64?
    /// The last attempt's error, while it waits to retry.
    public let error: String?

    init(_ status: TaskStatus) {
        taskIdentifier = status.id; state = status.state; url = status.url
        countOfBytesReceived = status.bytes; countOfBytesExpectedToReceive = status.expected; error = status.error
    }
}

/// Why a task ended without its file, or a request file was refused.
public struct SpoolTaskError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The daemon's reason code: `http-status`, `sha256-mismatch`, `cancelled`, `bad-url`, …
    public let code: String
    public let message: String
    /// For `deadline` and `cancelled`: what the task waited on or last failed with (`code`,
    /// `host`, `httpStatus`, `curlCode`, `attempts`, `waitingFor`; see the README's markers).
    public var cause: FailureCause? = nil
    public var description: String { "\(code): \(message)" + (cause.map { " (cause \($0.code): \($0.message))" } ?? "") }
}

/// One ending. `URLSessionDownloadDelegate`'s and `URLSessionTaskDelegate`'s callbacks as cases.
public struct SpoolSessionEvent: Sendable {
    public enum Kind: Sendable {
        /// The file is published at `location` (in the final folder, where it stays: unlike
        /// `URLSession`'s temporary file, it need not be moved before returning).
        case didFinishDownloadingTo(URL)
        /// An upload was accepted by the server.
        case didFinishUploading
        /// A 304 confirmed the file already published at `location` (`on-exists: skip-unchanged`).
        case didConfirmUnchanged(URL)
        /// The task failed for good.
        case didCompleteWithError(SpoolTaskError)
        /// Every task of the group has ended (`urlSessionDidFinishEvents`).
        case didFinishEvents(published: Int, failed: Int)
        /// The request file was refused before any task of it started.
        case didReject(SpoolTaskError)
    }

    public let kind: Kind
    /// `REQUEST#INDEX` for a task's item, `REQUEST` for a group or a rejection.
    public let taskIdentifier: String
    public let group: String?
    public let sha256: String?
    public let countOfBytesReceived: Int64?
    /// Store it once the event is handled; `events(after:)` it after a restart.
    public let cursor: String

    init(_ event: SpoolEvent) {
        var error = SpoolTaskError(code: event.code ?? "unknown", message: event.message ?? "")
        error.cause = event.cause
        switch (event.event, event.outcome) {
        case ("group", _): kind = .didFinishEvents(published: event.published ?? 0, failed: event.failed ?? 0)
        case ("rejected", _): kind = .didReject(error)
        case (_, "failed"): kind = .didCompleteWithError(error)
        case (_, "unchanged"): kind = .didConfirmUnchanged(URL(fileURLWithPath: event.file ?? event.record))
        case (_, "uploaded"): kind = .didFinishUploading
        default: kind = .didFinishDownloadingTo(URL(fileURLWithPath: event.file ?? event.record))
        }
        taskIdentifier = event.id
        group = event.group
        sha256 = event.sha256
        countOfBytesReceived = event.bytes
        cursor = event.cursor
    }
}

/// The endings as an `AsyncSequence`. Each `next()` waits on a thread of its own (inotify, no
/// polling) so the caller's executor is never blocked; cancelling the iterating task ends it.
public struct SpoolSessionEvents: AsyncSequence, Sendable {
    public typealias Element = SpoolSessionEvent
    let reader: SpoolEventReader

    public func makeAsyncIterator() -> Iterator { Iterator(reader: reader) }

    public struct Iterator: AsyncIteratorProtocol {
        let reader: SpoolEventReader
        var buffered: [SpoolSessionEvent] = []

        public mutating func next() async -> SpoolSessionEvent? {
            if buffered.isEmpty {
                if Task.isCancelled { return nil }
                let reader = self.reader
                let events: [SpoolEvent]? = await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        Thread.detachNewThread { continuation.resume(returning: reader.next()) }
                    }
                } onCancel: {
                    reader.stop()
                }
                guard let events else { return nil }
                buffered = events.map(SpoolSessionEvent.init).reversed()
                if buffered.isEmpty { return await next() }
            }
            return buffered.popLast()
        }
    }
}

public enum SpoolSessionError: Error, Sendable, CustomStringConvertible {
    /// The task was not written (a bad URL or value, with the rule) or the daemon refused.
    case refused(String)
    case unknownTask(String)
    case io(String)

    public var description: String {
        switch self {
        case .refused(let s), .unknownTask(let s), .io(let s): return s
        }
    }
}
