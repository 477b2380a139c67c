import Foundation
import SpoolStore

extension ControlClient {
    /// `spoolfetch probe HOST`: asks each live daemon that reports `host` unreachable (`HOST:PORT`,
    /// or `HOST` on any port) to probe it now; when none reports it yet (a report may be a second
    /// old), every live daemon is asked. Returns the answers of those that probed.
    public static func probe(host: String, spool: String, timeout: Double = 10) throws(OperatorError) -> [ControlResult] {
        let overview = try SpoolOverview.read(spool: spool)
        guard !overview.reports.isEmpty else {
            throw .refused("no daemon runs on \(spool): a drain (run --once or --due) tries every host when it starts; nothing changed")
        }
        let listing = overview.reports.filter { report in
            report.daemon.unreachableHosts?.contains { HostKeyMatch.names(host, $0.host) } ?? false
        }
        var answers: [ControlResult] = []
        var refusals: [OperatorError] = []
        for report in listing.isEmpty ? overview.reports : listing {
            do { answers.append(try ask(report.daemon, verb: .probe, id: host, spool: spool, timeout: timeout)) } catch {
                refusals.append(error)
            }
        }
        if answers.isEmpty, let first = refusals.first { throw first }
        return answers
    }

    /// Why `host` cannot name a host (nil when it can): not empty, no spaces, `/` or `#`.
    public static func hostProblem(_ host: String) -> String? {
        if host.isEmpty { return "a host is required, as status shows it (example.org or example.org:443)" }
        if host.contains(where: { $0.isWhitespace || $0 == "/" || $0 == "#" || $0 == "@" }) {
            return "'\(host)' is not a host: give it as status shows it (example.org or example.org:443), not a URL or an id"
        }
        return nil
    }
}
