import Foundation
import SpoolMetrics
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
    /// With no daemon running: what the last drains left (cron mode; see `LastDrainView.swift`).
    public var lastDrains: [DrainRecord]? = nil

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
        where name.hasSuffix(".json") && !name.hasPrefix(".") && !DrainRecord.isRecord(name) {
            guard let data = FileManager.default.contents(atPath: statusDir.appendingPathComponent(name).path),
                  let report = try? JSONDecoder().decode(StatusReport.self, from: data) else { continue }
            if report.daemon.host == host && kill(report.daemon.pid, 0) != 0 && errno == ESRCH { continue }
            overview.reports.append(report)
            overview.daemons.append(Self.aged(report.daemon, now: Date()))
            overview.tasks += report.tasks
            overview.morePending += report.morePending
        }
        if overview.daemons.isEmpty {
            overview.addDrainRecords(drainRecords(statusFolder: statusDir.path), spool: root.path)
        }
        let incoming = ((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("incoming").path)) ?? [])
        for name in incoming.sorted() where DirectoryWatcher.isCandidate(name) {
            overview.tasks.append(TaskStatus(id: name, request: name, group: "", name: "", url: "", state: "queued", bytes: 0,
                                             expected: nil, rate: nil, eta: nil, attempts: 0, error: nil, startsAt: nil,
                                             finishedAt: nil))
        }
        return overview
    }
}

extension SpoolOverview {
    /// A report older than this while it says transfers run is stale: a running daemon rewrites
    /// it every second while anything runs.
    public static let staleAfter: Double = 10

    /// `daemon` with its report's age, and whether it is stale, as read at `now`: `status` never
    /// passes off an old report as the current state.
    public static func aged(_ daemon: DaemonStatus, now: Date) -> DaemonStatus {
        var d = daemon
        guard let written = RFC3339.parse(d.updatedAt) else { return d }
        let age = max(0, now.timeIntervalSince(written))
        d.reportAgeSeconds = Int(age.rounded(.down))
        d.stale = d.running > 0 && age > staleAfter
        return d
    }
}

extension SpoolOverview {
    /// `status --metrics`: the live daemons' metrics (`status/HOST-PID.prom`, what each writes
    /// to `--metrics-file` too) merged into one Prometheus text document.
    public func metricsText(spool: String) -> String {
        let folder = URL(fileURLWithPath: spool).appendingPathComponent("status")
        let documents = daemons.compactMap { d -> String? in
            FileManager.default.contents(atPath: folder.appendingPathComponent("\(d.host)-\(d.pid).prom").path)
                .map { String(decoding: $0, as: UTF8.self) }
        }
        return ExpositionText.merge(documents)
    }
}

/// Why an operator command could not be carried out.
public enum OperatorError: Error, CustomStringConvertible {
    case noSpool(String)
    /// Not an id at all (`slow#x`): the executable exits 64.
    case malformedID(String, reason: String)
    case unknownID(String)
    /// The request is not held by a running daemon because it has ended or not started: its
    /// folder says which (`done`, `failed`, `rejected`, `queued`).
    case notRunning(id: String, state: String, hint: String)
    case noAnswer(pid: Int32, seconds: Double)
    case refused(String)
    case io(String)

    public var description: String {
        switch self {
        case .noSpool(let s):
            let exists = FileManager.default.fileExists(atPath: s)
            return "\(s) is not a spool (\(exists ? "no incoming/ folder" : "it does not exist")): pass the right --spool or set SPOOLFETCH_SPOOL; "
                + "to make a new one: mkdir -p \(s) and start spoolfetch run --spool \(s), which makes its folders"
        case .malformedID(let id, let reason): return "malformed id '\(id)': \(reason) (an id is REQUEST or REQUEST#INDEX, as in nightly#3)"
        case .unknownID(let id): return "unknown id \(id): no running daemon has it and no spool folder holds it (see spoolfetch status)"
        case .notRunning(let id, let state, let hint): return "\(id) is \(state): \(hint)"
        case .noAnswer(let pid, let seconds): return "the daemon (pid \(pid)) did not answer within \(Int(seconds)) s"
        case .refused(let message): return message
        case .io(let message): return message
        }
    }
}

/// `spoolfetch cancel|pause|resume|retry ID`: finds the daemon that holds ID in its status
/// report, drops a command file for it into `control/`, and waits for its answer.
public enum ControlClient {
    /// `retryDeadline`: for a retry of a failed request, the deadline its new request gets
    /// (`retry --deadline`), in place of every one it had (see `FailedRetry.retryBytes`).
    public static func send(_ verb: ControlCommand.Verb, id: String, spool: String,
                            timeout: Double = 10, retryDeadline: String? = nil) throws(OperatorError) -> ControlResult {
        let parsed = try ControlID(parsing: id)
        let overview = try SpoolOverview.read(spool: spool)
        let request = parsed.request
        // A report lists some of a large request's items (the next due, at most 1,000 paused):
        // any of them names the daemon for every other.
        let live = { (t: TaskStatus) in (t.id == id || t.request == request) && t.state != "done" && t.state != "failed" }
        var owner = overview.reports.first { $0.tasks.contains(where: live) }?.daemon
        if owner == nil, retryDeadline == nil, overview.reports.count == 1, let daemon = overview.reports.first?.daemon, isClaimed(request, spool: spool) {
            // Listed nowhere but claimed, and one daemon runs: it is asked; if it does not hold
            // the request (a dead worker's, not yet taken over), the folders decide as before.
            do throws(OperatorError) {
                return try ask(daemon, verb: verb, id: id, spool: spool, timeout: timeout, retryDeadline: retryDeadline)
            } catch {
                guard case .refused(let message) = error, message.hasPrefix("no task ") else { throw error }
            }
            owner = nil
        }
        // The folders are the truth (a status report may be up to a second old): a request in
        // failed/ and no longer active has ended.
        if verb == .retry, FileManager.default.fileExists(atPath: spool + "/failed/" + request),
           !isClaimed(request, spool: spool) {
            // Who may write failed/ (root, the daemon's user, anyone in a spool without `init`)
            // queues it again here; anyone else asks a daemon, which checks the caller and
            // queues it as the daemon's user (`FailedRetry`).
            if let retryDeadline, let problem = retryDeadlineProblem(retryDeadline) { throw .refused(problem) }
            if faccessat(AT_FDCWD, spool + "/failed", W_OK | X_OK, AT_EACCESS) == 0 {
                try checkOwner(of: spool + "/failed/" + request, request: request, verb: verb, spool: spool)
                return try retryFailed(request: request, id: id, spool: spool, deadline: retryDeadline)
            }
            guard let daemon = overview.reports.first?.daemon else {
                try checkOwner(of: spool + "/failed/" + request, request: request, verb: verb, spool: spool)
                var st = stat()
                let folderOwner = stat(spool + "/failed", &st) == 0 ? SpoolAccounts.userName(st.st_uid) : "the daemon's user"
                throw .refused("\(request) is in failed/, which only \(folderOwner) and root may write, and no daemon runs on \(spool) "
                               + "to queue it again for you: run spoolfetch retry \(id) while the daemon runs, or as \(folderOwner) "
                               + "or root; nothing changed")
            }
            return try ask(daemon, verb: verb, id: id, spool: spool, timeout: timeout, retryDeadline: retryDeadline)
        }
        if retryDeadline != nil {
            throw .refused("retry --deadline applies to a request in failed/ (its failed items are queued again with it); "
                           + "\(id) is not one")
        }
        if owner == nil, verb == .cancel, let path = claimedPath(request, spool: spool) {
            try checkOwner(of: path, request: request, verb: verb, spool: spool)
            // Cron mode: no running daemon has it, and a worker folder holds it: if that
            // worker is dead, the request is filed as cancelled here (`OrphanCancel`).
            guard parsed.index == nil else {
                throw .refused("no daemon is running: only a whole request can be cancelled now (spoolfetch cancel \(request))")
            }
            // Filing it means taking the dead worker's folder over, which only who may write
            // active/ can (root and the daemon's user after `init`): a producer waits for a
            // daemon to adopt it, and then cancels it through that daemon like any other.
            if faccessat(AT_FDCWD, spool + "/active", W_OK | X_OK, AT_EACCESS) != 0 {
                var st = stat()
                let folderOwner = stat(spool + "/active", &st) == 0 ? SpoolAccounts.userName(st.st_uid) : "the daemon's user"
                throw .refused("\(request) is held by a worker that is gone, in active/, which only \(folderOwner) and root may write: "
                               + "run spoolfetch cancel \(id) once a daemon has taken it over (spoolfetch status lists it; a starting "
                               + "daemon takes over every dead worker's requests), or as \(folderOwner) or root; nothing changed")
            }
            return try OrphanCancel.cancel(request: request, id: id, spool: spool)
        }
        guard let daemon = owner else { throw ended(id: id, request: request, verb: verb, spool: spool) }
        return try ask(daemon, verb: verb, id: id, spool: spool, timeout: timeout)
    }

    /// Drops the command into `control/` for `daemon` and waits for its answer.
    static func ask(_ daemon: DaemonStatus, verb: ControlCommand.Verb, id: String, spool: String,
                    timeout: Double, retryDeadline: String? = nil) throws(OperatorError) -> ControlResult {
        let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let name = "cmd-\(daemon.pid)-\(suffix)"
        let answer = "res-\(daemon.pid)-\(suffix)"
        do {
            let layout = try SpoolLayout(root: spool)
            try layout.control.writeAtomically(name, SpoolJSON.encode(ControlCommand(verb: verb, id: id, deadline: retryDeadline)))
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

    /// Whether a worker holds a request of that name: `active/W/R` in any worker's folder (or
    /// `active/R`, the layout of older versions).
    static func isClaimed(_ request: String, spool: String) -> Bool { claimedPath(request, spool: spool) != nil }

    /// Where a worker holds a request of that name, if one does.
    static func claimedPath(_ request: String, spool: String) -> String? {
        let active = spool + "/active/"
        if FileManager.default.fileExists(atPath: active + request) { return active + request }
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: active)) ?? []
        return folders.first { !$0.hasPrefix(".") && FileManager.default.fileExists(atPath: active + $0 + "/" + request) }
            .map { active + $0 + "/" + request }
    }

    /// Acting without a daemon (`retry` of a failed request, `cancel` of a dead worker's), the
    /// client applies the daemon's rule itself: the request file's owner, root, the spool's
    /// owner or an operator (`VerbPermission`); anyone else is refused, and nothing changes.
    static func checkOwner(of path: String, request: String, verb: ControlCommand.Verb, spool: String) throws(OperatorError) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        var groups = [gid_t](repeating: 0, count: Int(getgroups(0, nil)) + 1)
        let n = getgroups(Int32(groups.count), &groups)
        let callerGroups = Array(groups.prefix(max(0, Int(n)))) + [getegid()]
        if let refusal = VerbPermission(spool: spool).refusal(caller: geteuid(), callerGroups: callerGroups, owner: st.st_uid,
                                                              request: request, verb: verb.rawValue) {
            throw .refused(refusal)
        }
    }

    /// Why no daemon holds `request`, from the folder it is in.
    static func ended(id: String, request: String, verb: ControlCommand.Verb, spool: String) -> OperatorError {
        func has(_ folder: String) -> Bool { FileManager.default.fileExists(atPath: spool + "/" + folder + "/" + request) }
        if has("incoming") {
            return .notRunning(id: id, state: "queued", hint: "still in incoming/, not claimed by a daemon yet; \(verb.rawValue) works once a daemon holds it")
        }
        if has("failed") {
            let what = verb == .retry ? "a daemon still holds it" : "it has ended in failed/ (see failed/\(request).error); spoolfetch retry \(request) queues its failed items again"
            return .notRunning(id: id, state: "failed", hint: what)
        }
        if has("done") { return .notRunning(id: id, state: "done", hint: "every item was published; there is nothing to \(verb.rawValue)") }
        if has("rejected") { return .notRunning(id: id, state: "rejected", hint: "the request file was refused; see rejected/\(request).error") }
        return .unknownID(id)
    }

    /// Why `text` cannot be a retry's deadline (not a deadline, or one that has passed); nil when it can.
    public static func retryDeadlineProblem(_ text: String, now: Date = Date()) -> String? {
        FailedRetry.deadlineProblem(text, now: now)
    }

    /// A request in `failed/`: its failed items go back into the queue as a new request file
    /// `R-retry-STAMP` (`FailedRetry`, the code the daemon runs too).
    static func retryFailed(request: String, id: String, spool: String, deadline: String? = nil) throws(OperatorError)
        -> ControlResult {
        if let deadline, let problem = retryDeadlineProblem(deadline) { throw .refused(problem) }
        let layout: SpoolLayout
        do { layout = try SpoolLayout(root: spool) } catch { throw .io("\(error)") }
        do {
            return try FailedRetry.retry(request: request, index: (try? ControlID(parsing: id))?.index, id: id, layout: layout,
                                         deadline: deadline)
        } catch {
            switch error {
            case .refused(let message): throw .refused(message)
            case .io(let message): throw .io(message)
            }
        }
    }
}

/// A control command's target: `REQUEST` (every item of a request file) or `REQUEST#INDEX`.
public struct ControlID: Sendable, Hashable {
    public var request: String
    public var index: Int?

    /// Refuses what cannot name a task, saying why: an empty or dot name, a `/`, control
    /// characters, or anything but a whole number after `#`.
    public init(parsing id: String) throws(OperatorError) {
        let parts = id.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0])
        if name.isEmpty { throw .malformedID(id, reason: "the request name before # is empty") }
        if name == "." || name == ".." || name.hasPrefix(".") { throw .malformedID(id, reason: "a request name does not start with '.'") }
        if name.contains("/") { throw .malformedID(id, reason: "a request name has no '/'") }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw .malformedID(id, reason: "a request name has no control characters")
        }
        request = name
        if parts.count == 2 {
            let tail = parts[1]
            guard !tail.isEmpty, tail.count <= 9, tail.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(tail) else {
                throw .malformedID(id, reason: "the part after # must be an item index, a whole number such as \(name)#0")
            }
            index = n
        } else {
            index = nil
        }
    }
}
