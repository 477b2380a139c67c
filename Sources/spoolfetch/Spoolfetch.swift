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
          spoolfetch run                       # watch ./spool until SIGTERM
          spoolfetch run --spool /var/spool/spoolfetch --once
          spoolfetch add https://example.org/data.csv --sha256 9f86d0…
        """,
        version: "0.1.0",
        subcommands: [Run.self, Add.self])
}

/// Options shared by every command that works on a spool.
struct SpoolOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The spool root. Default: $SPOOLFETCH_SPOOL, else ./spool.", valueName: "dir"))
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
        Example: spoolfetch run --spool /var/spool/spoolfetch --once --concurrency 32
        """)

    @OptionGroup var spool: SpoolOption

    @Flag(help: "Drain: exit when nothing is pending or running (items waiting for their earliest start count as pending).")
    var once = false

    @Option(help: ArgumentHelp("Transfers at once. Example: --concurrency 32", valueName: "n"))
    var concurrency: Int = 16

    @Option(name: .customLong("per-host"), help: ArgumentHelp("Transfers at once to one host:port. Example: --per-host 4", valueName: "n"))
    var perHost: Int = 6

    @Option(help: ArgumentHelp("Discretionary window, local time; may cross midnight. Example: --window 22:00-06:00", valueName: "HH:MM-HH:MM"))
    var window: String?

    @Option(name: .customLong("stall-timeout"), help: ArgumentHelp("Seconds without a byte before a transfer is cut and retried. Example: --stall-timeout 60", valueName: "seconds"))
    var stallTimeout: Int = 60

    @Option(name: .customLong("max-attempts"), help: ArgumentHelp("Attempts per item before it fails for good; 0 = until the resource timeout. Example: --max-attempts 5", valueName: "n"))
    var maxAttempts: Int = 10

    @Option(name: .customLong("retry-base"), help: ArgumentHelp("First retry delay in seconds (doubles each attempt, with jitter). Example: --retry-base 1", valueName: "seconds"))
    var retryBase: Double = 1

    @Option(name: .customLong("retry-cap"), help: ArgumentHelp("Longest retry delay in seconds. Example: --retry-cap 300", valueName: "seconds"))
    var retryCap: Double = 300

    @Option(name: .customLong("resource-timeout"), help: ArgumentHelp("Seconds after which an item is not retried any more (like URLSession's timeoutIntervalForResource). Example: --resource-timeout 86400", valueName: "seconds"))
    var resourceTimeout: Double = 7 * 24 * 3600

    @Option(name: .customLong("min-free"), help: ArgumentHelp("Free space to keep on the staging (and final) filesystem; items wait rather than fill it (k/M/G suffixes). Example: --min-free 1G", valueName: "bytes"))
    var minFree: String = "64M"

    @Option(name: .customLong("max-bytes"), help: ArgumentHelp("Daemon-wide cap on any response body; 0 = none (k/M/G suffixes). Example: --max-bytes 10G", valueName: "bytes"))
    var maxBytes: String = "0"

    @Option(name: .customLong("max-rate"), help: ArgumentHelp("Daemon-wide receive rate, shared by the running transfers; 0 = unlimited (k/M/G suffixes, per second). Example: --max-rate 20M", valueName: "bytes/s"))
    var maxRate: String = "0"

    @Option(name: .customLong("max-items"), help: ArgumentHelp("Most items one request file may hold. Example: --max-items 1000", valueName: "n"))
    var maxItems: Int = 10_000

    @Option(name: .customLong("max-claims"), help: ArgumentHelp("Most requests claimed at once (each holds a lock); more wait in incoming/ and are claimed as earlier ones end. Example: --max-claims 8192", valueName: "n"))
    var maxClaims: Int = 8192

    @Option(name: .customLong("adopt-interval"), help: ArgumentHelp("Seconds between looks for requests whose worker died (other daemons on the same spool); 0 = only at start. Example: --adopt-interval 30", valueName: "seconds"))
    var adoptInterval: Double = 30

    @Option(name: .customLong("final-folder"), help: ArgumentHelp("Where published files and markers go (default: SPOOL/done). Example: --final-folder /srv/data/incoming", valueName: "dir"))
    var finalFolder: String?

    @Option(name: .customLong("expect-slack"), help: ArgumentHelp("A body more than this many times its expected-bytes fails, unless max-bytes is set. Example: --expect-slack 2", valueName: "factor"))
    var expectSlack: Double = 2

    @Option(name: .customLong("ca-file"), help: ArgumentHelp("Extra CA certificates (PEM) to trust, besides the system's. Example: --ca-file /etc/ssl/private-ca.pem", valueName: "file"))
    var caFile: String?

    @Option(name: .customLong("ca-path"), help: ArgumentHelp("Extra folder of hashed CA certificates to trust. Example: --ca-path /etc/ssl/extra", valueName: "dir"))
    var caPath: String?

    @Option(name: .customLong("on-item"), help: ArgumentHelp("Command run (sh -c) after each item ends, with SPOOLFETCH_* variables. Example: --on-item 'logger \"$SPOOLFETCH_PATH\"'", valueName: "command"))
    var onItem: String?

    @Option(name: .customLong("on-group"), help: ArgumentHelp("Command run once after every item of a request file ended. Example: --on-group /usr/local/bin/ingest", valueName: "command"))
    var onGroup: String?

    @Option(name: .customLong("log-level"), help: ArgumentHelp("trace, debug, info, notice, warning, error or critical. Example: --log-level debug", valueName: "level"))
    var logLevel: String = "info"

    func run() throws {
        var configuration = DaemonConfiguration()
        configuration.spool = spool.resolved
        configuration.once = once
        configuration.concurrency = concurrency
        configuration.perHost = perHost
        configuration.window = window
        configuration.stallTimeout = stallTimeout
        configuration.maxAttempts = maxAttempts
        configuration.retryBase = retryBase
        configuration.retryCap = retryCap
        configuration.expectSlack = expectSlack
        configuration.caFile = caFile
        configuration.caPath = caPath
        configuration.onItem = onItem
        configuration.onGroup = onGroup
        configuration.logLevel = logLevel
        configuration.resourceTimeout = resourceTimeout
        configuration.maxItems = maxItems
        configuration.maxClaims = maxClaims
        configuration.adoptInterval = adoptInterval
        configuration.finalFolder = finalFolder
        guard let minFreeBytes = Daemon.byteCount(minFree) else { throw ValidationError("--min-free must be a byte count such as 512M, got '\(minFree)'") }
        guard let maxBytesValue = Daemon.byteCount(maxBytes) else { throw ValidationError("--max-bytes must be a byte count such as 10G, got '\(maxBytes)'") }
        guard let maxRateValue = Daemon.byteCount(maxRate) else { throw ValidationError("--max-rate must be a byte count per second such as 20M, got '\(maxRate)'") }
        configuration.minFree = minFreeBytes
        configuration.maxBytes = maxBytesValue
        configuration.maxRate = maxRateValue
        do { try configuration.validate() } catch { throw ValidationError(error.description) }
        let status = Daemon.run(configuration)
        if status != 0 { throw ExitCode(status) }
    }
}

struct Add: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate a request and drop it into the spool's incoming/ folder.",
        discussion: """
        The request is checked exactly as the daemon checks dropped files; a bad URL, scheme or option is
        refused with a message and nothing is written. Prints the request file's name.
        Example: spoolfetch add https://example.org/a.iso --name a.iso --priority high --earliest-start 2026-11-23T02:00:00Z
        """)

    @Argument(help: ArgumentHelp("The URL to download (http or https).", valueName: "url"))
    var url: String

    @Option(help: ArgumentHelp("Output file name in the final folder. Example: --name report.csv", valueName: "name"))
    var name: String?

    @Option(name: .customLong("earliest-start"), help: ArgumentHelp("Not started before this RFC 3339 time. Example: --earliest-start 2026-11-23T02:00:00Z", valueName: "time"))
    var earliestStart: String?

    @Option(name: .customLong("expected-bytes"), help: ArgumentHelp("Best-guess size (k/M/G suffixes). Example: --expected-bytes 200M", valueName: "bytes"))
    var expectedBytes: String?

    @Option(name: .customLong("max-bytes"), help: ArgumentHelp("Hard size cap; a larger body fails the item. Example: --max-bytes 1G", valueName: "bytes"))
    var maxBytes: String?

    @Option(help: ArgumentHelp("Expected SHA-256 (64 hex digits); a mismatch publishes nothing.", valueName: "hex"))
    var sha256: String?

    @Option(help: ArgumentHelp("high, normal or low. Example: --priority high", valueName: "priority"))
    var priority: String?

    @Flag(help: "Run only inside the daemon's discretionary window.")
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
            let written = try RequestWriter.add(request, spool: spool.resolved)
            print(written)
        } catch {
            FileHandle.standardError.write(Data("spoolfetch add: \(error.description); nothing was written\n".utf8))
            throw ExitCode(2)
        }
    }
}
