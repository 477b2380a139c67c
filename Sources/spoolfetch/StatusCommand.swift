import ArgumentParser
import Foundation
import SpoolDaemon

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every task: pending, waiting, running, retrying, recently done or failed.",
        discussion: """
        On a terminal: a table that fits its width. Otherwise: a header line, then one tab-separated line
        per task (id, state, name, url, bytes, expected, rate, eta, attempts, error). --json prints
        {"daemons": [...], "tasks": [...], "morePending": N} on one line.
        Exit status: 0 when a daemon runs on the spool; 1 when none does (the tasks still queued in
        incoming/ are listed, and a line on stderr says so); 2 when the spool cannot be read.
        --watch prints a new snapshot every second until interrupted: the table redrawn on a terminal,
        else one snapshot after another (a blank line between plain snapshots, one JSON line each).
        Example: spoolfetch status --spool /var/spool/spoolfetch --json | jq '.tasks[] | select(.state == "failed")'
        """)

    @OptionGroup var spool: SpoolOption

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(help: "Print a new snapshot every second until interrupted (works into a pipe or file too).")
    var watch = false

    func run() throws {
        let terminal = isatty(STDOUT_FILENO) != 0
        var hadDaemon: Bool?
        while true {
            let overview: SpoolOverview
            do { overview = try SpoolOverview.read(spool: spool.resolved) } catch {
                FileHandle.standardError.write(Data("spoolfetch status: \(error.description)\n".utf8))
                throw ExitCode(2)
            }
            let hasDaemon = !overview.daemons.isEmpty
            if !hasDaemon && hadDaemon != false {
                FileHandle.standardError.write(Data("spoolfetch status: no daemon is running on \(spool.resolved)\n".utf8))
            }
            hadDaemon = hasDaemon
            if json {
                print(overview.json(), terminator: "")
            } else if terminal {
                if watch { print("\u{1B}[H\u{1B}[2J", terminator: "") }
                print(overview.table(columns: Self.terminalColumns()), terminator: "")
            } else {
                print(overview.plainLines(), terminator: watch ? "\n" : "")
            }
            // stdout into a file or pipe is block-buffered: each snapshot must leave now.
            fflush(nil)
            guard watch else { break }
            sleep(1)   // a viewer's refresh interval, not a synchronisation
        }
        if hadDaemon == false { throw ExitCode(1) }
    }

    static func terminalColumns() -> Int {
        var size = winsize()
        return ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 80
    }
}
