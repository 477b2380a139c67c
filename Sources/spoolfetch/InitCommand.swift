import ArgumentParser
import Foundation
import SpoolStore

/// `spoolfetch init`: makes a spool shared by several producers, or tightens one, idempotently
/// (`SpoolOwnership` is the layout; the README's "spoolfetch init" section its table).
struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a spool for several producers, or tighten an existing one: owned by the daemon's user, producers may only create entries in incoming/, tmp/, outgoing/ and control/.",
        discussion: """
        Run as root (it sets owners). Running it again changes nothing; on a loosened spool it sets the modes back.
        Exit status 2: a folder could not be made or set (a symlink in a folder's place is refused, never followed).
        Example: spoolfetch init --spool /var/spool/spoolfetch --user spoolfetch --producers spoolfetch-producers --operators adm
        """)

    @Option(name: .long, help: ArgumentHelp("The spool root; made if missing. Default: $SPOOLFETCH_SPOOL, else ./spool.", valueName: "dir"))
    var spool: String?
    @Option(help: ArgumentHelp("The user the daemon runs as: it owns every folder. Example: --user spoolfetch", valueName: "user"))
    var user: String
    @Option(help: ArgumentHelp("The producers' group: its members may drop requests and uploads and run the control commands on their own requests.", valueName: "group"))
    var producers: String
    @Option(help: ArgumentHelp("The group that may read final/ (default: the producers' group).", valueName: "group"))
    var consumers: String?
    @Option(help: ArgumentHelp("The operators' group: its members may cancel, pause, resume and retry anyone's requests; recorded in SPOOL/operators, where run finds it.", valueName: "group"))
    var operators: String?

    func run() throws {
        let root = spool ?? ProcessInfo.processInfo.environment["SPOOLFETCH_SPOOL"].flatMap { $0.isEmpty ? nil : $0 } ?? "spool"
        guard let account = SpoolAccounts.user(named: user) else { throw ValidationError("--user: no user named '\(user)'") }
        guard let producersGID = SpoolAccounts.group(named: producers) else {
            throw ValidationError("--producers: no group named '\(producers)'")
        }
        var consumersGID = producersGID
        if let consumers {
            guard let gid = SpoolAccounts.group(named: consumers) else { throw ValidationError("--consumers: no group named '\(consumers)'") }
            consumersGID = gid
        }
        if let operators, SpoolAccounts.group(named: operators) == nil {
            throw ValidationError("--operators: no group named '\(operators)'")
        }
        let layout = SpoolOwnership(user: account.uid, userGroup: account.gid, producers: producersGID, consumers: consumersGID)
        do {
            let changes = try layout.apply(at: root, operators: operators)
            for line in changes { print(line) }
            if changes.isEmpty { print("\(root): already as init makes it; nothing changed") }
        } catch {
            FileHandle.standardError.write(Data("spoolfetch init: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}
