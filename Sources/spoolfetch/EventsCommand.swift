import ArgumentParser
import Foundation
import SpoolClient

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print item and group endings and rejections, in order, resumable from a cursor.",
        discussion: """
        Reads the spool's own records (item markers and group markers in the final folder, error files in
        rejected/), so no daemon keeps state for a consumer. Each line ends in (text) or carries (--json) a
        cursor: start the next run with --since CURSOR of the last line handled and it prints exactly what
        came after, also across restarts of the consumer. --follow keeps waiting (inotify) for more.
        Text lines are tab-separated: cursor, event (item, group, rejected), outcome, id, path, reason.
        Example: spoolfetch events --follow --json --since "$(cat cursor)"
        """)

    @Flag(help: "Keep waiting for new endings (until SIGINT/SIGTERM).")
    var follow = false

    @Option(help: ArgumentHelp("Print only what came after this cursor, as a previous run printed it.", valueName: "cursor"))
    var since: String?

    @Flag(help: "One JSON object per line (fields: event, outcome, request, group, index, url, file, record, bytes, sha256, code, message, published, failed, at, cursor).")
    var json = false

    @Option(name: .customLong("final-folder"), help: ArgumentHelp("The daemon's final folder, when not SPOOL/final. Example: --final-folder /srv/data", valueName: "dir"))
    var finalFolder: String?

    @OptionGroup var spool: SpoolOption

    func run() throws {
        var cursor: EventCursor?
        if let since, !since.isEmpty {
            guard let parsed = EventCursor(since) else {
                FileHandle.standardError.write(Data("spoolfetch events: \(EventError.badCursor(since).description)\n".utf8))
                throw ExitCode(64)
            }
            cursor = parsed
        }
        let reader: SpoolEventReader
        do {
            reader = try SpoolEventReader(spool: spool.resolved, finalFolder: finalFolder.map(absolutePath), since: cursor, follow: follow)
        } catch {
            FileHandle.standardError.write(Data("spoolfetch events: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        while let events = reader.next() {
            Output.write(events.map { (json ? $0.jsonLine : $0.textLine) + "\n" }.joined())
        }
    }
}
