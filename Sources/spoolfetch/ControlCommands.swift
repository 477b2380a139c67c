import ArgumentParser
import Foundation
import SpoolClient
import SpoolStore

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
            print(result.state.map { "\(result.message) (state: \($0))" } ?? result.message)
        } catch {
            FileHandle.standardError.write(Data("spoolfetch \(Self.verb.rawValue): \(error.description)\n".utf8))
            // A malformed id is a usage error, like a malformed flag.
            if case .malformedID = error { throw ExitCode(64) }
            throw ExitCode(2)
        }
    }
}

struct Cancel: ControlVerbCommand {
    static let verb = ControlCommand.Verb.cancel
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a task: it ends in failed/ with the reason 'cancelled'.",
        discussion: "ID is REQUEST#INDEX for one item or REQUEST for all its items (see spoolfetch status).\nExample: spoolfetch cancel nightly#2")
    @Argument(help: ArgumentHelp("REQUEST#INDEX or REQUEST. Example: nightly#2", valueName: "id")) var id: String
    @OptionGroup var spool: SpoolOption
}

struct Pause: ControlVerbCommand {
    static let verb = ControlCommand.Verb.pause
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause a task; its partial download is kept until resume.",
        discussion: "Example: spoolfetch pause nightly#2")
    @Argument(help: ArgumentHelp("REQUEST#INDEX or REQUEST. Example: nightly#2", valueName: "id")) var id: String
    @OptionGroup var spool: SpoolOption
}

struct Resume: ControlVerbCommand {
    static let verb = ControlCommand.Verb.resume
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Resume a paused task from its partial download.",
        discussion: "Example: spoolfetch resume nightly#2")
    @Argument(help: ArgumentHelp("REQUEST#INDEX or REQUEST. Example: nightly#2", valueName: "id")) var id: String
    @OptionGroup var spool: SpoolOption
}

struct Retry: ControlVerbCommand {
    static let verb = ControlCommand.Verb.retry
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Retry now: a task waiting to retry starts at once; a failed request's failed items are queued again.",
        discussion: """
        For a request in failed/, its failed items (or just REQUEST#INDEX) go back into incoming/ as a new
        request REQUEST-retry-STAMP with the same group and options; failed/REQUEST and its .error stay as the record,
        and failed/REQUEST.retried names the new request, so a second retry queues nothing twice.
        A deadline counted from the claim (deadline: 6h) counts again from the retry's claim; one at a time
        that has passed is dropped, unless --deadline gives the retried items a new one (either form).
        In a spool made by spoolfetch init a producer may not write failed/: the running daemon queues
        the producer's own failed request again for it (the new request stays the producer's).
        Example: spoolfetch retry nightly
        Example: spoolfetch retry nightly --deadline 2h
        """)
    @Argument(help: ArgumentHelp("REQUEST#INDEX or REQUEST. Example: nightly", valueName: "id")) var id: String
    @Option(help: ArgumentHelp("For a failed request: the retried items' deadline, in place of theirs (RFC 3339, or from the claim such as 90m, 6h, 2d)",
                               valueName: "deadline")) var deadline: String?
    @OptionGroup var spool: SpoolOption

    func validate() throws {
        if let deadline, let problem = ControlClient.retryDeadlineProblem(deadline) { throw ValidationError(problem) }
    }

    func run() throws {
        do {
            let result = try ControlClient.send(Self.verb, id: id, spool: spool.resolved, retryDeadline: deadline)
            print(result.state.map { "\(result.message) (state: \($0))" } ?? result.message)
        } catch {
            FileHandle.standardError.write(Data("spoolfetch retry: \(error.description)\n".utf8))
            if case .malformedID = error { throw ExitCode(64) }
            throw ExitCode(2)
        }
    }
}
