import Foundation
import SpoolCore
import Logging
import SpoolStore

/// `spoolfetch cancel|pause|resume|retry`: reads a command file `control/cmd-PID-X` meant for
/// this daemon (PID 0: any daemon), removes it, turns it into lifecycle events for the items it
/// names, and answers in `control/res-PID-X`.
final class ControlHandler {
    private let directory: Directory
    private let logger: Logger

    init(directory: Directory, logger: Logger) {
        self.directory = directory
        self.logger = logger
    }

    /// Whether `name` is a command for this daemon (`cmd-PID-X` with its pid, or pid 0), not
    /// an answer or another daemon's command.
    static func isCommandForThisProcess(_ name: String) -> Bool {
        let parts = name.split(separator: "-", maxSplits: 2)
        guard parts.count == 3, parts[0] == "cmd", let target = Int32(parts[1]) else { return false }
        return target == 0 || target == getpid()
    }

    /// Handles `name` if it is a command for this daemon. `request` finds a claimed request by
    /// name; `apply` hands one item a command and says whether it changed anything.
    func handle(_ name: String, request: (String) -> RequestRecord?,
                apply: (ItemRecord, ControlCommand.Verb) -> Bool) {
        guard Self.isCommandForThisProcess(name) else { return }
        let parts = name.split(separator: "-", maxSplits: 2)
        let bytes: [UInt8]
        do { bytes = try directory.read(name, limit: 4096) } catch {
            logger.warning("could not read a control command: \(error)", metadata: ["command": "\(name)"])
            return
        }
        directory.remove(name)
        let result: ControlResult
        if let command = SpoolJSON.decode(ControlCommand.self, bytes) {
            result = perform(command, request: request, apply: apply)
        } else {
            result = ControlResult(ok: false, message: "the command file is not a command", items: [])
        }
        logger.notice("control command", metadata: ["command": "\(name)", "ok": "\(result.ok)", "message": "\(result.message)"])
        do {
            try directory.writeAtomically("res-" + parts[1] + "-" + parts[2], SpoolJSON.encode(result))
        } catch {
            logger.error("could not answer a control command: \(error)", metadata: ["command": "\(name)"])
        }
    }

    private func perform(_ command: ControlCommand, request find: (String) -> RequestRecord?,
                         apply: (ItemRecord, ControlCommand.Verb) -> Bool) -> ControlResult {
        let (requestName, index): (String, Int?) = {
            if let hash = command.id.lastIndex(of: "#"), let i = Int(command.id[command.id.index(after: hash)...]) {
                return (String(command.id[..<hash]), i)
            }
            return (command.id, nil)
        }()
        guard let request = find(requestName) else {
            return ControlResult(ok: false, message: "no task \(command.id) on this daemon (pid \(getpid())); see spoolfetch status", items: [])
        }
        let targets = request.items.filter { index == nil || $0.index == index }
        guard !targets.isEmpty else {
            return ControlResult(ok: false, message: "request \(requestName) has no item \(index ?? -1)", items: [])
        }
        var acted: [String] = []
        var states: [String] = []
        for record in targets {
            let before = record.phase.label
            if apply(record, command.verb) { acted.append(record.id) } else { states.append("\(record.id) is \(before)") }
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
