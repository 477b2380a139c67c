import Foundation
import SpoolRequest
import SpoolStore
import SpoolWatcher

/// What `spoolfetch status` shows: every live daemon's tasks plus the requests still in `incoming/`.
public struct SpoolOverview: Sendable {
    /// Each live daemon's report.
    public var reports: [StatusReport] = []
    public var daemons: [DaemonStatus]
    public var tasks: [TaskStatus]
    public var morePending: Int

    /// Reads `status/*.json` (skipping reports of daemons on this host that are gone) and
    /// lists `incoming/`.
    public static func read(spool: String) throws(OperatorError) -> SpoolOverview {
        let root = URL(fileURLWithPath: spool)
        guard FileManager.default.fileExists(atPath: root.appendingPathComponent("incoming").path) else {
            throw .noSpool(spool)
        }
        var overview = SpoolOverview(daemons: [], tasks: [], morePending: 0)
        let statusDir = root.appendingPathComponent("status")
        let host = ProcessInfo.processInfo.hostName
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: statusDir.path)) ?? []).sorted()
        where name.hasSuffix(".json") && !name.hasPrefix(".") {
            guard let data = FileManager.default.contents(atPath: statusDir.appendingPathComponent(name).path),
                  let report = try? JSONDecoder().decode(StatusReport.self, from: data) else { continue }
            if report.daemon.host == host && kill(report.daemon.pid, 0) != 0 && errno == ESRCH { continue }
            overview.reports.append(report)
            overview.daemons.append(report.daemon)
            overview.tasks += report.tasks
            overview.morePending += report.morePending
        }
        let incoming = ((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("incoming").path)) ?? [])
        for name in incoming.sorted() where DirectoryWatcher.isCandidate(name) {
            overview.tasks.append(TaskStatus(id: name, request: name, group: "", name: "", url: "", state: "queued", bytes: 0,
                                             expected: nil, rate: nil, eta: nil, attempts: 0, error: nil, startsAt: nil,
                                             finishedAt: nil))
        }
        return overview
    }

    /// `{"daemons": […], "tasks": […], "morePending": N}`.
    public func json() -> String {
        struct Shape: Encodable { var daemons: [DaemonStatus]; var tasks: [TaskStatus]; var morePending: Int }
        return String(decoding: SpoolJSON.encode(Shape(daemons: daemons, tasks: tasks, morePending: morePending)), as: UTF8.self)
    }

    /// One line per task, tab-separated (for scripts and pipes).
    public func plainLines() -> String {
        tasks.map { t in
            [t.id, t.state, t.name, t.url, "\(t.bytes)", t.expected.map(String.init) ?? "-",
             t.rate.map { String(Int($0)) } ?? "-", t.eta.map { String(Int($0.rounded())) } ?? "-", "\(t.attempts)",
             t.error ?? ""].joined(separator: "\t")
        }.joined(separator: "\n") + (tasks.isEmpty ? "" : "\n")
    }

    /// A table with progress bars, for a terminal `columns` wide.
    public func table(columns: Int = 100) -> String {
        var out = ""
        for d in daemons {
            out += "daemon \(d.host) pid \(d.pid), up since \(d.startedAt): \(d.running) running, \(d.queued) queued, "
                + "\(d.published) published, \(d.failed) failed, \(d.rejected) rejected\n"
        }
        if daemons.isEmpty { out += "no daemon is running on this spool\n" }
        let nameWidth = max(10, min(32, columns - 72))
        out += pad("ID", 24) + " " + pad("STATE", 14) + " " + pad("NAME", nameWidth) + " " + pad("PROGRESS", 22) + " "
            + pad("RATE", 10) + " " + pad("ETA", 7) + " TRIES\n"
        for t in tasks {
            var progress = Self.human(t.bytes)
            if let e = t.expected, e > 0 {
                let fraction = min(1, Double(t.bytes) / Double(e))
                let filled = Int((fraction * 10).rounded(.down))
                progress = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 10 - filled) + "] "
                    + String(format: "%3d%%", Int(fraction * 100))
            }
            let rate = t.rate.map { Self.human(Int64($0)) + "/s" } ?? ""
            let eta = t.eta.map { Self.duration($0) } ?? ""
            out += pad(t.id, 24) + " " + pad(t.state, 14) + " " + pad(t.name, nameWidth) + " " + pad(progress, 22) + " "
                + pad(rate, 10) + " " + pad(eta, 7) + " \(t.attempts)"
            if let error = t.error, t.state == "failed" || t.state == "retrying" { out += "  " + error }
            out += "\n"
        }
        if morePending > 0 { out += "… and \(morePending) more pending\n" }
        return out
    }

    private func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? String(s.prefix(width - 1)) + "…" : s + String(repeating: " ", count: width - s.count)
    }

    static func human(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes), unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? "\(s / 3600)h\(s % 3600 / 60)m" : s >= 60 ? "\(s / 60)m\(s % 60)s" : "\(s)s"
    }
}

/// Why an operator command could not be carried out.
public enum OperatorError: Error, CustomStringConvertible {
    case noSpool(String)
    case unknownID(String)
    case noAnswer(pid: Int32, seconds: Double)
    case refused(String)
    case io(String)

    public var description: String {
        switch self {
        case .noSpool(let s): return "\(s) is not a spool (no incoming/ folder); pass --spool or set SPOOLFETCH_SPOOL"
        case .unknownID(let id): return "unknown id \(id): no running daemon has it and it is not in failed/ (see spoolfetch status)"
        case .noAnswer(let pid, let seconds): return "the daemon (pid \(pid)) did not answer within \(Int(seconds)) s"
        case .refused(let message): return message
        case .io(let message): return message
        }
    }
}

/// `spoolfetch cancel|pause|resume|retry ID`: finds the daemon that holds ID in its status
/// report, drops a command file for it into `control/`, and waits for its answer.
public enum ControlClient {
    public static func send(_ verb: ControlCommand.Verb, id: String, spool: String,
                            timeout: Double = 10) throws(OperatorError) -> ControlResult {
        let overview = try SpoolOverview.read(spool: spool)
        let request = id.split(separator: "#", maxSplits: 1).first.map(String.init) ?? id
        let live = { (t: TaskStatus) in (t.id == id || t.request == id) && t.state != "done" && t.state != "failed" }
        let owner = overview.reports.first { $0.tasks.contains(where: live) }?.daemon
        // The folders are the truth (a status report may be up to a second old): a request in
        // failed/ and no longer active has ended.
        if verb == .retry, FileManager.default.fileExists(atPath: spool + "/failed/" + request),
           !FileManager.default.fileExists(atPath: spool + "/active/" + request) {
            return try retryFailed(request: request, id: id, spool: spool)
        }
        guard let daemon = owner else { throw .unknownID(id) }
        let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let name = "cmd-\(daemon.pid)-\(suffix)"
        let answer = "res-\(daemon.pid)-\(suffix)"
        do {
            let layout = try SpoolLayout(root: spool)
            try layout.control.writeAtomically(name, SpoolJSON.encode(ControlCommand(verb: verb, id: id)))
            guard FileAppearance.wait(for: answer, in: layout.control.path, timeout: timeout) else {
                layout.control.remove(name)
                throw OperatorError.noAnswer(pid: daemon.pid, seconds: timeout)
            }
            let bytes = try layout.control.read(answer)
            layout.control.remove(answer)
            guard let result = SpoolJSON.decode(ControlResult.self, bytes) else { throw OperatorError.io("unreadable answer") }
            if !result.ok { throw OperatorError.refused(result.message) }
            return result
        } catch let error as OperatorError {
            throw error
        } catch {
            throw .io("\(error)")
        }
    }

    /// A request in `failed/`: its failed items go back into the queue as a new request file
    /// `R-retry-STAMP` (same group name, same options); `failed/R` and its `.error` stay as the record.
    static func retryFailed(request: String, id: String, spool: String) throws(OperatorError) -> ControlResult {
        let failedDir = spool + "/failed/"
        guard let bytes = FileManager.default.contents(atPath: failedDir + request),
              let errorData = FileManager.default.contents(atPath: failedDir + request + ".error"),
              let record = try? JSONDecoder().decode(ErrorRecord.self, from: errorData) else {
            throw .io("cannot read failed/\(request) and its .error")
        }
        let file: RequestFile
        do { file = try RequestParser.parse(fileName: request, bytes: [UInt8](bytes)) } catch { throw .io("\(error)") }
        var indices = Set((record.items ?? []).map(\.index))
        if let hash = id.firstIndex(of: "#"), let one = Int(id[id.index(after: hash)...]) {
            guard indices.contains(one) else { throw .refused("item \(id) did not fail; nothing to retry") }
            indices = [one]
        }
        let items = file.items.filter { indices.contains($0.index) }
        guard !items.isEmpty else { throw .refused("\(request) has no failed item to retry") }
        var lines = ["# retry of failed/\(request)", "group: \(file.group)"]
        for item in items {
            lines.append("url: \(item.url.string)")
            lines.append("name: \(item.name)")
            if let v = item.expectedBytes { lines.append("expected-bytes: \(v)") }
            if let v = item.maxBytes { lines.append("max-bytes: \(v)") }
            if let v = item.sha256 { lines.append("sha256: \(v)") }
            lines.append("priority: \(item.priority.rawValue)")
            if item.discretionary { lines.append("discretionary: yes") }
            for header in item.headers { lines.append("header: \(header.line)") }
        }
        let stamp = RFC3339.format(Date()).filter { $0.isNumber }
        let name = "\(request)-retry-\(stamp)"
        do {
            let layout = try SpoolLayout(root: spool)
            try layout.tmp.writeAtomically(name, Array((lines.joined(separator: "\n") + "\n").utf8), sync: true)
            try layout.tmp.rename(name, to: name, in: layout.incoming, replace: false)
        } catch {
            throw .io("cannot queue the retry: \(error)")
        }
        return ControlResult(ok: true, message: "queued \(items.count) failed item(s) of \(request) again as incoming/\(name)",
                             items: items.map { "\(request)#\($0.index)" })
    }
}
