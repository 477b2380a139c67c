import Foundation
import SpoolfetchKit

// fetch-and-wait SPOOL URL SHA256 STATE-FOLDER
//
// Adds a download task (once: its identifier is kept in STATE-FOLDER/task) and handles the
// endings after the cursor kept in STATE-FOLDER/cursor, storing the cursor after each one — so
// when the program is killed and started again it neither adds the task twice nor misses or
// repeats an ending. Exits 0 when the task's file is published, 1 when it failed.
let arguments = CommandLine.arguments
guard arguments.count == 5, let url = URL(string: arguments[2]) else {
    FileHandle.standardError.write(Data("usage: fetch-and-wait SPOOL URL SHA256 STATE-FOLDER\n".utf8))
    exit(64)
}
let session = SpoolSession(spool: URL(fileURLWithPath: arguments[1]))
let state = URL(fileURLWithPath: arguments[4])
let taskFile = state.appendingPathComponent("task")
let cursorFile = state.appendingPathComponent("cursor")

/// Writes `text` to `file` atomically (a crash leaves the old or the new text, never half).
func store(_ text: String, in file: URL) throws {
    try Data(text.utf8).write(to: file, options: .atomic)
}

do {
    let task: String
    if let kept = try? String(contentsOf: taskFile, encoding: .utf8) {
        task = kept
    } else {
        var request = SpoolTaskRequest(url: url)
        request.sha256 = arguments[3]
        request.countOfBytesClientExpectsToReceive = 1 << 20
        request.priority = .high
        task = try session.downloadTask(with: request).taskIdentifier
        try store(task, in: taskFile)
    }
    print("task \(task)")
    let cursor = try? String(contentsOf: cursorFile, encoding: .utf8)
    var published = false
    for await event in try session.events(after: cursor) {
        switch event.kind {
        case .didFinishDownloadingTo(let location) where event.taskIdentifier.hasPrefix(task + "#"):
            print("downloaded \(location.path) sha256 \(event.sha256 ?? "?")")
            published = true
        case .didCompleteWithError(let error) where event.taskIdentifier.hasPrefix(task + "#"):
            print("failed \(error)")
        case .didFinishEvents(let ok, let failed) where event.taskIdentifier == task:
            try store(event.cursor, in: cursorFile)
            print("group ended: \(ok) published, \(failed) failed")
            exit(published ? 0 : 1)
        default:
            break
        }
        try store(event.cursor, in: cursorFile)
    }
} catch {
    FileHandle.standardError.write(Data("fetch-and-wait: \(error)\n".utf8))
    exit(2)
}
