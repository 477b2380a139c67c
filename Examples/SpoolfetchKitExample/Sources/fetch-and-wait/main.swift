import Foundation
import SpoolfetchKit

// fetch-and-wait SPOOL URL SHA256 STATE-FOLDER
//
// Adds a download task and handles the endings after the cursor kept in STATE-FOLDER/cursor,
// storing the cursor after each one. Safe to kill at any point and to start again:
// - the task is named after what it fetches (`fetch-` and the digest's first 16 digits), so
//   asking for it again finds it, queued, running or ended, and never adds a second one (saving
//   an identifier the daemon made up could be cut short by a kill right after the add);
// - started again after the task's group ended (its cursor is then past that ending), it reports
//   the ending from the spool instead of waiting for an event that already came;
// - each line of its output is written at once (`say`), so it reaches a pipe or a log file while
//   the program waits: `print` to anything but a terminal is block-buffered, and a waiting
//   program's lines stayed in its buffer.
// Exits 0 when the task's file is published, 1 when it failed.

/// One line of output, written with one write(2) (FileHandle is not buffered).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
let arguments = CommandLine.arguments
guard arguments.count == 5, let url = URL(string: arguments[2]) else {
    FileHandle.standardError.write(Data("usage: fetch-and-wait SPOOL URL SHA256 STATE-FOLDER\n".utf8))
    exit(64)
}
let session = SpoolSession(spool: URL(fileURLWithPath: arguments[1]))
let cursorFile = URL(fileURLWithPath: arguments[4]).appendingPathComponent("cursor")

/// Writes `text` to `file` atomically (a crash leaves the old or the new text, never half).
func store(_ text: String, in file: URL) throws {
    try Data(text.utf8).write(to: file, options: .atomic)
}

do {
    var request = SpoolTaskRequest(url: url)
    request.sha256 = arguments[3]
    request.countOfBytesClientExpectsToReceive = 1 << 20
    request.priority = .high
    let task = try session.downloadTask(with: request, named: "fetch-" + arguments[3].prefix(16)).taskIdentifier
    say("task \(task)")
    if let ended = session.endedGroup(of: task) {
        for item in ended.items {
            if let location = item.location { say("downloaded \(location.path) sha256 \(item.sha256 ?? "?")") }
            if let error = item.error { say("failed \(error)") }
        }
        say("group ended: \(ended.published) published, \(ended.failed) failed")
        exit(ended.failed == 0 ? 0 : 1)
    }
    let cursor = try? String(contentsOf: cursorFile, encoding: .utf8)
    for await event in try session.events(after: cursor) {
        switch event.kind {
        case .didFinishDownloadingTo(let location) where event.taskIdentifier.hasPrefix(task + "#"):
            say("downloaded \(location.path) sha256 \(event.sha256 ?? "?")")
        case .didCompleteWithError(let error) where event.taskIdentifier.hasPrefix(task + "#"):
            say("failed \(error)")
        case .didFinishEvents(let ok, let failed) where event.taskIdentifier == task:
            try store(event.cursor, in: cursorFile)
            say("group ended: \(ok) published, \(failed) failed")
            // The group's counts, not what this run saw: a run killed after an item's event and
            // started again sees only the group's.
            exit(failed == 0 && ok > 0 ? 0 : 1)
        default:
            break
        }
        try store(event.cursor, in: cursorFile)
    }
} catch {
    FileHandle.standardError.write(Data("fetch-and-wait: \(error)\n".utf8))
    exit(2)
}
