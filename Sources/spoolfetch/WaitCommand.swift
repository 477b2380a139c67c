import ArgumentParser
import Foundation
import SpoolClient
import SpoolfetchKit

/// A duration as `--timeout` takes it: seconds, or a number with `s`, `m`, `h` or `d`.
struct WaitTimeout: ExpressibleByArgument {
    var seconds: Double

    init?(argument: String) {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var text = Substring(argument)
        var factor = 1.0
        if let last = text.last, let unit = units[last] { factor = unit; text = text.dropLast() }
        guard let value = Double(text), value.isFinite, value >= 0 else { return nil }
        seconds = value * factor
    }
}

/// Shared by `wait` and `add --wait`: waits, prints each group marker's path as its request
/// ends, and turns the result into the exit status (0 all published, 1 any failed or rejected,
/// 75 timed out — sysexits' EX_TEMPFAIL, as a drain that left work for later).
enum WaitRunner {
    static func run(_ requests: [String], spool: String, finalFolder: String?, timeout: WaitTimeout?) throws {
        let session = SpoolSession(spool: URL(fileURLWithPath: spool), finalFolder: finalFolder.map { URL(fileURLWithPath: $0) })
        let result: RequestWaiter.Result
        do {
            result = try session.wait(for: requests, timeout: timeout?.seconds) { ending in
                Output.line(ending.path)
                if ending.outcome != "published" {
                    FileHandle.standardError.write(Data("spoolfetch wait: \(ending.request) \(ending.outcome) (see \(ending.path))\n".utf8))
                }
            }
        } catch {
            FileHandle.standardError.write(Data("spoolfetch wait: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        switch result {
        case .ended(let failed):
            if failed { throw ExitCode(1) }
        case .timedOut(let open):
            FileHandle.standardError.write(Data("spoolfetch wait: timed out; still open: \(open.joined(separator: " "))\n".utf8))
            throw ExitCode(75)
        }
    }
}

struct Wait: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait until each request's group has ended; print each group marker's path.",
        discussion: """
        Blocks (inotify, no polling; no daemon needs to run while it waits) until every REQUEST — a request
        file's name, as add prints it (add's whole output may be given as it is) — has ended: its group marker is in the final folder, or its error file
        in rejected/. Prints the group marker's path (a rejection's: rejected/REQUEST.error) as each ends.
        Exit status: 0 every request published, 1 any failed or was rejected, 75 the timeout passed first,
        2 a request found nowhere on the spool.
        Example: spoolfetch wait "$(spoolfetch add https://example.org/a.csv)" --timeout 1h
        """)

    @Argument(help: ArgumentHelp("Request names, as add printed them. Example: add-20261122T091500Z-4242-1", valueName: "request"))
    var requests: [String]

    @Option(help: ArgumentHelp("Give up after this long (s, m, h, d suffixes; default: no limit). Example: --timeout 30m", valueName: "duration"))
    var timeout: WaitTimeout?

    @Option(name: .customLong("final-folder"), help: ArgumentHelp("The daemon's final folder, when not SPOOL/final. Example: --final-folder /srv/data", valueName: "dir"))
    var finalFolder: String?

    @OptionGroup var spool: SpoolOption

    /// The names given, `add`'s output taken as it is: `wait "$(spoolfetch add …)"` gets the
    /// request's name and its group marker's path on two lines; a path (a request name has no
    /// `/`) is left out.
    var names: [String] {
        requests.flatMap { $0.split(separator: "\n") }.map(String.init).filter { !$0.isEmpty && !$0.contains("/") }
    }

    func validate() throws {
        if names.isEmpty { throw ValidationError("name at least one request") }
    }

    func run() throws {
        try WaitRunner.run(names, spool: spool.resolved, finalFolder: finalFolder.map(absolutePath), timeout: timeout)
    }
}

/// Unbuffered standard output: a script reading `wait`'s or `events`' lines gets each at once,
/// not when a buffer fills.
enum Output {
    static func line(_ text: String) { write(text + "\n") }
    static func write(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }
}
