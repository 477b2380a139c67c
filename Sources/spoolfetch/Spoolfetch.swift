import ArgumentParser
import Foundation
import SpoolDaemon

/// `spoolfetch`: the command line. Argument parsing and nothing else; the work is in SpoolDaemon.
@main
struct Spoolfetch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spoolfetch",
        abstract: "Background downloads for servers: drop request files into a spool, find verified files with done markers.",
        discussion: """
        Examples:
          spoolfetch run                                  # watch ./spool until SIGTERM
          spoolfetch run --spool /var/spool/spoolfetch --once
          spoolfetch add https://example.org/data.csv --sha256 9f86d0…
          spoolfetch status --watch
          spoolfetch pause nightly#3
        """,
        version: Daemon.version,
        subcommands: [Run.self, Add.self, Status.self, Cancel.self, Pause.self, Resume.self, Retry.self])
}

/// Options shared by every command that works on a spool.
struct SpoolOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The spool root. Default: $SPOOLFETCH_SPOOL, else ./spool. Example: --spool /var/spool/spoolfetch", valueName: "dir"))
    var spool: String?

    var resolved: String {
        spool ?? ProcessInfo.processInfo.environment["SPOOLFETCH_SPOOL"].flatMap { $0.isEmpty ? nil : $0 } ?? "spool"
    }
}

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the daemon: claim request files from incoming/ and download them.",
        discussion: """
        Without --once it runs until SIGTERM or SIGINT. With --once it drains: it exits when nothing is
        pending or running, with status 0 when every item was published and 1 when any failed or was rejected.
        Precedence: flags, then $SPOOLFETCH_SPOOL (for the spool), then --config FILE, then the defaults shown.
        Example: spoolfetch run --spool /var/spool/spoolfetch --once --concurrency 32
        """)

    @Option(name: .long, help: ArgumentHelp("The spool root. Default: $SPOOLFETCH_SPOOL, else ./spool. Example: --spool /var/spool/spoolfetch", valueName: "dir"))
    var spool: String?

    @Option(help: ArgumentHelp("A config file of 'key = value' lines named like these flags. Example: --config /etc/spoolfetch.conf", valueName: "file"))
    var config: String?

    @Flag(name: .customLong("print-config"), help: "Print the effective configuration (in the config file's format) and exit.")
    var printConfig = false

    @Flag(help: "Drain: exit when nothing is pending or running (items waiting for their earliest start count as pending).")
    var once = false

    @Option(help: ArgumentHelp("Transfers at once (default 16). Example: --concurrency 32", valueName: "n"))
    var concurrency: Int?

    @Option(name: .customLong("per-host"), help: ArgumentHelp("Transfers at once to one host:port (default 6). Example: --per-host 4", valueName: "n"))
    var perHost: Int?

    @Option(help: ArgumentHelp("Discretionary window, local time; may cross midnight. Example: --window 22:00-06:00", valueName: "HH:MM-HH:MM"))
    var window: String?

    @Option(name: .customLong("stall-timeout"), help: ArgumentHelp("Seconds without a byte before a transfer is cut and retried (default 60). Example: --stall-timeout 30", valueName: "seconds"))
    var stallTimeout: Int?

    @Option(name: .customLong("resource-timeout"), help: ArgumentHelp("Seconds after which an item is not retried any more (default 604800, 7 days). Example: --resource-timeout 86400", valueName: "seconds"))
    var resourceTimeout: Double?

    @Option(name: .customLong("max-attempts"), help: ArgumentHelp("Attempts per item before it fails for good; 0 = until the resource timeout (default 10). Example: --max-attempts 5", valueName: "n"))
    var maxAttempts: Int?

    @Option(name: .customLong("retry-base"), help: ArgumentHelp("First retry delay in seconds, doubling with jitter (default 1). Example: --retry-base 2", valueName: "seconds"))
    var retryBase: Double?

    @Option(name: .customLong("retry-cap"), help: ArgumentHelp("Longest retry delay in seconds (default 300). Example: --retry-cap 600", valueName: "seconds"))
    var retryCap: Double?

    @Option(name: .customLong("max-rate"), help: ArgumentHelp("Daemon-wide receive rate shared by the running transfers; 0 = unlimited (k/M/G suffixes). Example: --max-rate 20M", valueName: "bytes/s"))
    var maxRate: String?

    @Option(name: .customLong("max-bytes"), help: ArgumentHelp("Daemon-wide cap on any response body; 0 = none (k/M/G suffixes). Example: --max-bytes 10G", valueName: "bytes"))
    var maxBytes: String?

    @Option(name: .customLong("expect-slack"), help: ArgumentHelp("A body more than this many times its expected-bytes fails, unless max-bytes is set (default 2). Example: --expect-slack 3", valueName: "factor"))
    var expectSlack: Double?

    @Option(name: .customLong("min-free"), help: ArgumentHelp("Free space kept on the staging (and final) filesystem; items wait rather than fill it (default 64M). Example: --min-free 1G", valueName: "bytes"))
    var minFree: String?

    @Option(name: .customLong("max-items"), help: ArgumentHelp("Most items one request file may hold (default 10000). Example: --max-items 1000", valueName: "n"))
    var maxItems: Int?

    @Option(name: .customLong("max-claims"), help: ArgumentHelp("Most requests claimed at once (each holds a lock); more wait in incoming/ (default 8192). Example: --max-claims 4096", valueName: "n"))
    var maxClaims: Int?

    @Option(name: .customLong("adopt-interval"), help: ArgumentHelp("Seconds between looks for requests whose worker died; 0 = only at start (default 30). Example: --adopt-interval 10", valueName: "seconds"))
    var adoptInterval: Double?

    @Option(name: .customLong("final-folder"), help: ArgumentHelp("Where published files and markers go (default: SPOOL/done). Example: --final-folder /srv/data/in", valueName: "dir"))
    var finalFolder: String?

    @Option(name: .customLong("ca-file"), help: ArgumentHelp("Extra CA certificates (PEM) to trust, besides the system's. Example: --ca-file /etc/ssl/private-ca.pem", valueName: "file"))
    var caFile: String?

    @Option(name: .customLong("ca-path"), help: ArgumentHelp("Extra folder of hashed CA certificates to trust. Example: --ca-path /etc/ssl/extra", valueName: "dir"))
    var caPath: String?

    @Option(name: .customLong("on-item"), help: ArgumentHelp("Command run (sh -c) after each item ends, with SPOOLFETCH_* variables. Example: --on-item 'logger \"$SPOOLFETCH_PATH\"'", valueName: "command"))
    var onItem: String?

    @Option(name: .customLong("on-group"), help: ArgumentHelp("Command run once after every item of a request file ended. Example: --on-group /usr/local/bin/ingest", valueName: "command"))
    var onGroup: String?

    @Option(name: .customLong("log-level"), help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (default info). Example: --log-level debug", valueName: "level"))
    var logLevel: String?

    func effectiveConfiguration() throws -> DaemonConfiguration {
        var c = DaemonConfiguration()
        if let config {
            guard let text = try? String(contentsOfFile: config, encoding: .utf8) else {
                throw ValidationError("cannot read the config file \(config)")
            }
            do { try c.apply(configFile: text, path: config) } catch { throw ValidationError(error.description) }
        }
        if let env = ProcessInfo.processInfo.environment["SPOOLFETCH_SPOOL"], !env.isEmpty { c.spool = env }
        let pairs: [(String, String?)] = [
            ("spool", spool), ("final-folder", finalFolder), ("concurrency", concurrency.map(String.init)),
            ("per-host", perHost.map(String.init)), ("window", window), ("stall-timeout", stallTimeout.map(String.init)),
            ("resource-timeout", resourceTimeout.map { "\($0)" }), ("retry-base", retryBase.map { "\($0)" }),
            ("retry-cap", retryCap.map { "\($0)" }), ("max-attempts", maxAttempts.map(String.init)), ("max-rate", maxRate),
            ("max-bytes", maxBytes), ("expect-slack", expectSlack.map { "\($0)" }), ("min-free", minFree),
            ("max-items", maxItems.map(String.init)), ("max-claims", maxClaims.map(String.init)),
            ("adopt-interval", adoptInterval.map { "\($0)" }), ("ca-file", caFile), ("ca-path", caPath),
            ("on-item", onItem), ("on-group", onGroup), ("log-level", logLevel),
        ]
        for (key, value) in pairs {
            guard let value else { continue }
            do { try c.set(key, value) } catch { throw ValidationError("--\(error.description)") }
        }
        c.once = once
        do { try c.validate() } catch { throw ValidationError(error.description) }
        return c
    }

    func run() throws {
        let configuration = try effectiveConfiguration()
        if printConfig {
            print(configuration.printed, terminator: "")
            return
        }
        let status = Daemon.run(configuration)
        if status != 0 { throw ExitCode(status) }
    }
}

struct Add: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate a request and drop it into the spool's incoming/ folder.",
        discussion: """
        The request is checked exactly as the daemon checks dropped files; a bad URL, scheme or option is
        refused with a message, exit status 2, and nothing is written. Prints the request file's name.
        Example: spoolfetch add https://example.org/a.iso --name a.iso --priority high --earliest-start 2026-11-23T02:00:00Z
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

    @Option(help: ArgumentHelp("Expected SHA-256 (64 hex digits); a mismatch publishes nothing. Example: --sha256 9f86d081…", valueName: "hex"))
    var sha256: String?

    @Option(help: ArgumentHelp("high, normal or low. Example: --priority high", valueName: "priority"))
    var priority: String?

    @Flag(help: "Run only inside the daemon's discretionary window (--window), or when nothing else waits.")
    var discretionary = false

    @Option(help: ArgumentHelp("Group name (default: the request file's name). Example: --group nightly", valueName: "name"))
    var group: String?

    @Option(help: ArgumentHelp("Extra request header, repeatable. Example: --header 'Accept: text/csv'", valueName: "header"))
    var header: [String] = []

    @OptionGroup var spool: SpoolOption

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
        do {
            print(try RequestWriter.add(request, spool: spool.resolved))
        } catch {
            FileHandle.standardError.write(Data("spoolfetch add: \(error.description); nothing was written\n".utf8))
            throw ExitCode(2)
        }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every task: pending, waiting, running, retrying, recently done or failed.",
        discussion: """
        On a terminal: a table with progress bars. Otherwise: tab-separated lines
        (id, state, name, url, bytes, expected, rate, eta, attempts, error). --json prints
        {"daemons": [...], "tasks": [...], "morePending": N} for batch tools.
        Example: spoolfetch status --spool /var/spool/spoolfetch --json | jq '.tasks[] | select(.state == "failed")'
        """)

    @OptionGroup var spool: SpoolOption

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(help: "Redraw every second until interrupted (a terminal view).")
    var watch = false

    func run() throws {
        repeat {
            let overview: SpoolOverview
            do { overview = try SpoolOverview.read(spool: spool.resolved) } catch {
                FileHandle.standardError.write(Data("spoolfetch status: \(error.description)\n".utf8))
                throw ExitCode(2)
            }
            if json {
                print(overview.json(), terminator: "")
            } else if isatty(STDOUT_FILENO) != 0 {
                if watch { print("\u{1B}[H\u{1B}[2J", terminator: "") }
                var size = winsize()
                let columns = ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 100
                print(overview.table(columns: columns), terminator: "")
            } else {
                print(overview.plainLines(), terminator: "")
            }
            FileHandle.standardOutput.synchronizeFile()
            if watch { sleep(1) }   // a viewer's refresh, not a synchronisation
        } while watch
    }
}

/// The shared shape of cancel, pause, resume and retry.
protocol ControlVerbCommand: ParsableCommand {
    static var verb: ControlCommand.Verb { get }
    var id: String { get }
    var spool: SpoolOption { get }
}

extension ControlVerbCommand {
    func run() throws {
        do {
            let result = try ControlClient.send(Self.verb, id: id, spool: spool.resolved)
            print(result.message)
        } catch {
            FileHandle.standardError.write(Data("spoolfetch \(Self.verb.rawValue): \(error.description)\n".utf8))
            throw ExitCode(2)
        }
    }
}

struct Cancel: ControlVerbCommand {
    static let verb = ControlCommand.Verb.cancel
    static let configuration = CommandConfiguration(
        abstract: "Cancel a task: it ends in failed/ with the reason 'cancelled'.",
        discussion: "ID is REQUEST#INDEX for one item or REQUEST for all its items (see spoolfetch status).\nExample: spoolfetch cancel nightly#2")
    @Argument(help: ArgumentHelp("REQUEST#INDEX or REQUEST. Example: nightly#2", valueName: "id")) var id: String
    @OptionGroup var spool: SpoolOption
}

struct Pause: ControlVerbCommand {
    static let verb = ControlCommand.Verb.pause
    static let configuration = CommandConfiguration(
        abstract: "Pause a task; its partial download is kept until resume.",
        discussion: "Example: spoolfetch pause nightly#2")
    @Argument(help: ArgumentHelp("REQUEST#INDEX or REQUEST. Example: nightly#2", valueName: "id")) var id: String
    @OptionGroup var spool: SpoolOption
}

struct Resume: ControlVerbCommand {
    static let verb = ControlCommand.Verb.resume
    static let configuration = CommandConfiguration(
        abstract: "Resume a paused task from its partial download.",
        discussion: "Example: spoolfetch resume nightly#2")
    @Argument(help: ArgumentHelp("REQUEST#INDEX or REQUEST. Example: nightly#2", valueName: "id")) var id: String
    @OptionGroup var spool: SpoolOption
}

struct Retry: ControlVerbCommand {
    static let verb = ControlCommand.Verb.retry
    static let configuration = CommandConfiguration(
        abstract: "Retry now: a task waiting to retry starts at once; a failed request's failed items are queued again.",
        discussion: """
        For a request in failed/, its failed items (or just REQUEST#INDEX) go back into incoming/ as a new
        request REQUEST-retry-STAMP with the same group and options; failed/REQUEST and its .error stay as the record.
        Example: spoolfetch retry nightly
        """)
    @Argument(help: ArgumentHelp("REQUEST#INDEX or REQUEST. Example: nightly", valueName: "id")) var id: String
    @OptionGroup var spool: SpoolOption
}
