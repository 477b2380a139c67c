import ArgumentParser
import Foundation
import SpoolClient

struct Add: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Validate a request and drop it into the spool's incoming/ folder.",
        discussion: """
        The request is checked exactly as the daemon checks dropped files; a bad URL, scheme or option is
        refused with a message, exit status 2, and nothing is written. Prints the request's name, then the path
        of the group marker it will produce (with --group G: the request is named G, or G~N when G was used).
        Example:
          spoolfetch add https://example.org/a.iso --name a.iso --priority high \\
            --earliest-start 2026-11-23T02:00:00Z
        """)

    @Argument(help: ArgumentHelp("The URL to download (http or https). Example: https://example.org/a.csv", valueName: "url"))
    var url: String

    @Option(help: ArgumentHelp("Output file name in the final folder. Example: --name report.csv", valueName: "name"))
    var name: String?

    @Option(name: .customLong("earliest-start"), help: ArgumentHelp("Not started before this RFC 3339 time. Example: --earliest-start 2026-11-23T02:00:00Z", valueName: "time"))
    var earliestStart: String?

    @Option(name: .customLong("expected-bytes"), help: ArgumentHelp("Best-guess size (k/M/G suffixes). Example: --expected-bytes 200M", valueName: "bytes"))
    var expectedBytes: String?

    @Option(name: .customLong("max-bytes"), help: ArgumentHelp("Hard size cap; a larger body fails the item. Example: --max-bytes 1G", valueName: "bytes"))
    var maxBytes: String?

    @Option(help: ArgumentHelp("Expected SHA-256 (64 hex digits); a mismatch publishes nothing. Example: --sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", valueName: "hex"))
    var sha256: String?

    @Option(help: ArgumentHelp("high, normal or low. Example: --priority high", valueName: "priority"))
    var priority: String?

    @Flag(help: "Run only inside the daemon's discretionary window (--window), or when nothing else waits.")
    var discretionary = false

    @Option(help: ArgumentHelp("Group name (default: the request file's name). Example: --group nightly", valueName: "name"))
    var group: String?

    @Option(help: ArgumentHelp("Extra request header, repeatable. Example: --header 'Accept: text/csv'", valueName: "header"))
    var header: [String] = []

    @Flag(help: "After writing, wait until the request's group has ended, as spoolfetch wait does (exit 0, 1 or 75).")
    var wait = false

    @Option(help: ArgumentHelp("With --wait: give up after this long (s, m, h, d suffixes). Example: --timeout 30m", valueName: "duration"))
    var timeout: WaitTimeout?

    @Option(name: .customLong("final-folder"), help: ArgumentHelp("The daemon's final folder, when not SPOOL/final (where the group marker will be).", valueName: "dir"))
    var finalFolder: String?

    @OptionGroup var spool: SpoolOption

    func validate() throws {
        if !wait && timeout != nil { throw ValidationError("--timeout goes with --wait") }
    }

    func run() throws {
        var request = AddRequest(url: url)
        request.name = name
        request.earliestStart = earliestStart
        request.expectedBytes = expectedBytes
        request.maxBytes = maxBytes
        request.sha256 = sha256
        request.priority = priority
        request.discretionary = discretionary
        request.group = group
        request.headers = header
        let written: String
        do {
            written = try RequestWriter.add(request, spool: spool.resolved, finalFolder: finalFolder.map(absolutePath))
        } catch {
            FileHandle.standardError.write(Data("spoolfetch add: \(error.description); nothing was written\n".utf8))
            throw ExitCode(2)
        }
        Output.line(written)
        Output.line(RequestWriter.groupMarkerPath(of: written, spool: spool.resolved, finalFolder: finalFolder.map(absolutePath)))
        if wait { try WaitRunner.run([written], spool: spool.resolved, finalFolder: finalFolder.map(absolutePath), timeout: timeout) }
    }
}
