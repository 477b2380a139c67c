import ArgumentParser
import Foundation
import SpoolClient
import SpoolStore

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "List every task: pending, waiting, running, retrying, recently done or failed.",
        discussion: """
        On a terminal: a table that fits its width, one line per task (ids shortened in the middle; --wide
        prints them whole): state, bytes done/total, percent, rate, ETA, name, attempts; a failed, retrying
        or waiting task says why in place of its progress. Otherwise: a header line, then one tab-separated line
        per task (id, state, name, url, bytes, expected, rate, eta, attempts, error). --json prints
        {"daemons": [...], "tasks": [...], "morePending": N} on one line.
        A daemon's report lists its running, retrying, paused and publishing items, the next 20 due and
        the recently ended; --all adds every other waiting item, read from the claimed request files and
        printed as it is read (with --json: one document, written as it goes), so a queue of a million
        items starts printing at once.
        Exit status: 0 when a daemon runs on the spool; 1 when none does (the tasks still queued in
        incoming/ are listed, and a line on stderr says so); 2 when the spool cannot be read.
        With no daemon, what the last drain (run --due or --once) left is shown, labelled "last drain at T,
        exit N": the hosts it found down with their next probe, and why each item it left waits (--json:
        lastDrains; piped, the label goes to stderr).
        --watch prints a new snapshot every second until interrupted: on a terminal redrawn in place like
        top (alternate screen, cut to the window with "… and N more", fitted again when the window is
        resized, the terminal restored on exit), else one snapshot after another (a blank line between
        plain snapshots, one JSON line each). --metrics prints the live daemons' Prometheus metrics once.
        Example: spoolfetch status --spool /var/spool/spoolfetch --json | jq '.tasks[] | select(.state == "failed")'
        """)

    @OptionGroup var spool: SpoolOption

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(help: "List every waiting item, not only the next 20 due (read from the spool, printed as it is read).")
    var all = false

    @Flag(help: "Print a new snapshot every second until interrupted (works into a pipe or file too).")
    var watch = false

    @Flag(help: "Print ids whole, however wide the rows get (on a terminal they are shortened in the middle to fit), and each task's owner (an OWNER column).")
    var wide = false

    @Flag(help: "Print the live daemons' Prometheus metrics once (the text --metrics-file holds), for scripts.")
    var metrics = false

    func run() throws {
        let terminal = isatty(STDOUT_FILENO) != 0
        if watch && terminal && !json && !all && !metrics && !wide { return try watchScreen() }
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
                for record in overview.lastDrains ?? [] {
                    FileHandle.standardError.write(Data("spoolfetch status: \(SpoolOverview.drainHeadline(record))\n".utf8))
                }
            }
            hadDaemon = hasDaemon
            if metrics {
                print(overview.metricsText(spool: spool.resolved), terminator: "")
                break
            } else if all {
                try printAll(overview, terminal: terminal)
                if watch { print("") }
            } else if json {
                print(overview.json(), terminator: "")
            } else if terminal {
                if watch { print("\u{1B}[H\u{1B}[2J", terminator: "") }
                print(overview.table(columns: Self.terminalColumns(), wide: wide), terminator: "")
            } else {
                print(overview.plainLines(wide: wide), terminator: watch ? "\n" : "")
            }
            // stdout into a file or pipe is block-buffered: each snapshot must leave now.
            fflush(nil)
            guard watch else { break }
            sleep(1)   // a viewer's refresh interval, not a synchronisation
        }
        if hadDaemon == false { throw ExitCode(1) }
    }

    /// `--all`: the report's tasks, then every other waiting item as `QueueListing` reads it.
    private func printAll(_ overview: SpoolOverview, terminal: Bool) throws {
        let live = Set(overview.tasks.map(\.id))
        let spoolPath = spool.resolved
        var failure: OperatorError?
        func stream(_ emit: (TaskStatus) -> Void) {
            do throws(OperatorError) {
                try QueueListing.stream(spool: spoolPath, skipping: live, heldHosts: overview.heldHostsFromDrains, emit: emit)
            }
            catch { failure = error }
        }
        if json {
            overview.streamJSON(write: { print($0, terminator: "") }, more: stream)
        } else if terminal {
            // The column fits the ids still to come too, not just the report's.
            let longestID = QueueListing.longestID(spool: spoolPath)
            print(overview.table(columns: Self.terminalColumns(), withMore: false, wide: wide, longestID: longestID), terminator: "")
            let layout = SpoolOverview.TableLayout(columns: Self.terminalColumns(), tasks: overview.tasks, wide: wide,
                                                   longestID: longestID)
            stream { print(layout.row($0), terminator: "") }
        } else {
            print(overview.plainLines(), terminator: "")
            stream { print(SpoolOverview.plainLine($0), terminator: "") }
        }
        if let failure {
            fflush(nil)
            FileHandle.standardError.write(Data("spoolfetch status: \(failure.description)\n".utf8))
            throw ExitCode(2)
        }
    }

    /// `--watch` on a terminal: redrawn in place like `top`, fitted to the window (see
    /// `TerminalScreen`, `SpoolOverview.screen`), until SIGINT, SIGTERM or SIGHUP.
    private func watchScreen() throws {
        let screen = TerminalScreen()
        defer { screen.restore() }
        var hadDaemon = false
        while true {
            let overview: SpoolOverview
            do { overview = try SpoolOverview.read(spool: spool.resolved) } catch {
                screen.restore()
                FileHandle.standardError.write(Data("spoolfetch status: \(error.description)\n".utf8))
                throw ExitCode(2)
            }
            hadDaemon = !overview.daemons.isEmpty
            let size = screen.size
            // A terminal gone (its writes fail, as after a hang-up) ends the watch too.
            guard screen.draw(overview.screen(columns: size.columns, rows: size.rows)) else { break }
            if screen.wait(seconds: 1) == .stop { break }   // a viewer's refresh interval, not a synchronisation
        }
        if !hadDaemon { throw ExitCode(1) }
    }

    static func terminalColumns() -> Int {
        var size = winsize()
        return ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 80
    }
}
