import ArgumentParser
import Foundation
import SpoolDaemon

/// `spoolfetch`: the command line. Argument parsing and nothing else; the work is in SpoolDaemon
/// (`run`) and SpoolClient (`add`, `status` and the control commands).
@main
struct Spoolfetch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spoolfetch",
        abstract: "Background downloads for servers: drop request files into a spool, find verified files with done markers.",
        discussion: """
        Examples:
          spoolfetch run                                  # watch ./spool until SIGTERM
          spoolfetch run --spool /var/spool/spoolfetch --once
          spoolfetch add https://example.org/data.csv --name data.csv --group nightly
          spoolfetch wait "$(spoolfetch add https://example.org/a.csv)" --timeout 1h
          spoolfetch events --follow --json
          spoolfetch status --watch
          spoolfetch pause nightly#3
        """,
        version: Daemon.version,
        subcommands: [Run.self, Init.self, Add.self, Wait.self, Events.self, Status.self, Cancel.self, Pause.self, Resume.self, Retry.self, Probe.self, Store.self])
}

/// Options shared by every command that works on a spool.
struct SpoolOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The spool root. Default: $SPOOLFETCH_SPOOL, else ./spool. Example: --spool /var/spool/spoolfetch", valueName: "dir"))
    var spool: String?

    /// The spool's absolute path: every path a command prints (a group marker, an event's file) is
    /// built on it, and a relative one printed by `add` in one folder means nothing to a consumer
    /// that reads it in another.
    var resolved: String {
        absolutePath(spool ?? ProcessInfo.processInfo.environment["SPOOLFETCH_SPOOL"].flatMap { $0.isEmpty ? nil : $0 } ?? "spool")
    }
}

/// `path` made absolute against the working folder, with `.` and `..` and doubled slashes folded,
/// so that the paths commands print can be used from anywhere. Symbolic links are left as they are
/// (a spool reached through a link stays named by the link).
func absolutePath(_ path: String) -> String {
    let base = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    var parts: [Substring] = []
    for part in base.split(separator: "/", omittingEmptySubsequences: true) {
        switch part {
        case ".": continue
        case "..": if !parts.isEmpty { parts.removeLast() }
        default: parts.append(part)
        }
    }
    return "/" + parts.joined(separator: "/")
}
