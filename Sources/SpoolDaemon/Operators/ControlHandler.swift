import Foundation
import SpoolCore
import Logging
import SpoolStore

/// `spoolfetch cancel|pause|resume|retry`: reads a command file `control/cmd-PID-X` meant for
/// this daemon (PID 0: any daemon), removes it, turns it into lifecycle events for the items it
/// names, and answers in `control/res-PID-X`.
///
/// A command acts only on its caller's own requests — the caller being the owner of the command
/// file — unless the caller is root, the daemon's user or an operator (`VerbPermission`).
///
/// `retry` of a request in `failed/` is carried out here for a caller that may not write
/// `failed/` itself (a producer, after `init`): the same rule, then `FailedRetry` as the daemon's
/// user; the new request stays the failed one's owner's (`FailedRetry.originalOwner`).
final class ControlHandler {
    private let layout: SpoolLayout
    private let directory: Directory
    private let logger: Logger
    let permission: VerbPermission

    init(layout: SpoolLayout, logger: Logger, operators: String? = nil) {
        self.layout = layout
        directory = layout.control
        self.logger = logger
        let gid = operators.flatMap(SpoolAccounts.group(named:))
        if let operators, gid == nil {
            logger.warning("the operators' group does not exist; only owners, root and the daemon's user may act on requests",
                           metadata: ["operators": "\(operators)"])
        }
        permission = VerbPermission(daemonUser: geteuid(), operators: gid)
    }

    /// Whether `name` is a command for this daemon (`cmd-PID-X` with its pid, or pid 0), not
    /// an answer or another daemon's command.
    static func isCommandForThisProcess(_ name: String) -> Bool {
        let parts = name.split(separator: "-", maxSplits: 2)
        guard parts.count == 3, parts[0] == "cmd", let target = Int32(parts[1]) else { return false }
        return target == 0 || target == getpid()
    }

    /// Handles `name` if it is a command for this daemon. `request` finds a claimed request by
    /// name; `apply` hands one item a command and says whether it changed anything; `whole`, when
    /// given, carries out a command for a whole request at once (with the caller's name) and
    /// answers it (nil: item by item): one answer and one log line whatever the request's size.
    func handle(_ name: String, request: (String) -> RequestRecord?, hosts: HostProbing,
                whole: ((RequestRecord, ControlCommand.Verb, String) -> ControlResult?)? = nil,
                apply: (ItemRecord, ControlCommand.Verb) -> Bool) {
        guard Self.isCommandForThisProcess(name) else { return }
        let parts = name.split(separator: "-", maxSplits: 2)
        let read: (bytes: [UInt8], owner: UInt32, links: Int)
        do { read = try directory.readWithOwner(name, limit: 4096) } catch {
            logger.warning("could not read a control command: \(error)", metadata: ["command": "\(name)"])
            directory.remove(name)
            return
        }
        directory.remove(name)
        sweepAnswers()
        let result: ControlResult
        if read.links != 1 {
            // Its owner is who wrote it only if it was written here (one link).
            result = ControlResult(ok: false, message: "the command file has \(read.links) hard links; not a command", items: [])
        } else if let command = SpoolJSON.decode(ControlCommand.self, read.bytes) {
            result = command.verb == .probe ? probe(command.id, caller: read.owner, hosts: hosts)
                : perform(command, caller: read.owner, request: request, hosts: hosts, whole: whole, apply: apply)
        } else {
            result = ControlResult(ok: false, message: "the command file is not a command", items: [])
        }
        logger.notice("control command", metadata: ["command": "\(name)", "caller": "\(SpoolAccounts.userName(read.owner))",
                                                    "ok": "\(result.ok)", "message": "\(result.message)"])
        do {
            try directory.writeAtomically("res-" + parts[1] + "-" + parts[2], SpoolJSON.encode(result))
        } catch {
            logger.error("could not answer a control command: \(error)", metadata: ["command": "\(name)"])
        }
    }

    /// Answers older than a minute that their client did not remove: in a sticky `control/`
    /// the client may not remove the daemon's file, so the daemon does.
    private func sweepAnswers() {
        for name in directory.list() where name.hasPrefix("res-") {
            guard let age = directory.secondsSinceModified(name), age > 60 else { continue }
            directory.remove(name)
        }
    }

    /// `retry` of `failed/REQUEST` (nil when no such request ended there): refused unless the
    /// caller may act on it (its owner is the owner of `failed/REQUEST`, the producer's file
    /// renamed there), else queued again by `FailedRetry`.
    private func retryFailed(_ request: String, index: Int?, id: String, deadline: String?, caller: uid_t) -> ControlResult? {
        var st = stat()
        guard !request.hasPrefix("."), !request.contains("/"),
              fstatat(layout.failed.fd, request, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        if let refusal = permission.refusal(caller: caller, callerGroups: SpoolAccounts.groups(of: caller), owner: st.st_uid,
                                            request: request, verb: "retry") {
            return ControlResult(ok: false, message: refusal, items: [], code: "not-owner")
        }
        do {
            return try FailedRetry.retry(request: request, index: index, id: id, layout: layout, deadline: deadline)
        } catch {
            switch error {
            case .refused(let message): return ControlResult(ok: false, message: message, items: [])
            case .io(let message): return ControlResult(ok: false, message: message, items: [])
            }
        }
    }

    private func perform(_ command: ControlCommand, caller: uid_t, request find: (String) -> RequestRecord?,
                         hosts: HostProbing, whole: ((RequestRecord, ControlCommand.Verb, String) -> ControlResult?)?,
                         apply: (ItemRecord, ControlCommand.Verb) -> Bool) -> ControlResult {
        let (requestName, index): (String, Int?) = {
            if let hash = command.id.lastIndex(of: "#"), let i = Int(command.id[command.id.index(after: hash)...]) {
                return (String(command.id[..<hash]), i)
            }
            return (command.id, nil)
        }()
        guard let request = find(requestName) else {
            if command.verb == .retry, let result = retryFailed(requestName, index: index, id: command.id, deadline: command.deadline, caller: caller) {
                return result
            }
            return ControlResult(ok: false, message: "no task \(command.id) on this daemon (pid \(getpid())); see spoolfetch status", items: [])
        }
        if let refusal = permission.refusal(caller: caller, callerGroups: SpoolAccounts.groups(of: caller), owner: request.owner,
                                            request: requestName, verb: command.verb.rawValue) {
            return ControlResult(ok: false, message: refusal, items: [], code: "not-owner")
        }
        if index == nil, let whole, let result = whole(request, command.verb, SpoolAccounts.userName(caller)) { return result }
        let targets = request.items.filter { index == nil || $0.index == index }
        guard !targets.isEmpty else {
            return ControlResult(ok: false, message: "request \(requestName) has no item \(index ?? -1)", items: [])
        }
        var acted: [String] = []
        var states: [String] = []
        for record in targets {
            let before = record.phase.label
            if apply(record, command.verb) { acted.append(record.id) } else { states.append("\(record.id) is \(before)" + probeHint(record, hosts)) }
        }
        let verb = command.verb.rawValue
        // The state the command left the item in (for one item, or a request whose items agree).
        let labels = Set(targets.map(\.phase.label))
        let state = labels.count == 1 ? labels.first : nil
        if acted.isEmpty {
            return ControlResult(ok: false, message: "nothing to \(verb): " + states.joined(separator: ", "), items: [],
                                 state: state)
        }
        return ControlResult(ok: true, message: "\(verb): \(acted.count) item(s)", items: acted, state: state)
    }
}
