import ArgumentParser
import Foundation
import SpoolClient

/// `spoolfetch probe HOST`: an unreachable host is tried now instead of at its next probe.
struct Probe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Probe an unreachable host now, not at its next probe time.",
        discussion: """
        HOST is as status shows it: HOST:PORT, or HOST for every port of it. The items waiting on it
        start at once if it answers. Root, the daemon's user and the operators' group may probe any host;
        anyone else only one that their own request waits on.
        Exit status 0: probed; 2: not unreachable, refused, or no daemon runs.
        Example: spoolfetch probe mirror.example.org:443
        """)
    @Argument(help: ArgumentHelp("The host, as status shows it. Example: mirror.example.org:443", valueName: "host")) var host: String
    @OptionGroup var spool: SpoolOption

    func validate() throws {
        if let problem = ControlClient.hostProblem(host) { throw ValidationError(problem) }
    }

    func run() throws {
        do {
            for answer in try ControlClient.probe(host: host, spool: spool.resolved) { print(answer.message) }
        } catch {
            FileHandle.standardError.write(Data("spoolfetch probe: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
    }
}
