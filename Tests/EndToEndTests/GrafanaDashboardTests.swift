import Foundation
import SpoolTestSupport
import XCTest

/// contrib/grafana/spoolfetch-dashboard.json: every metric its queries name is one the real
/// daemon exports (read from a live daemon's metrics file while it has downloaded, uploaded and
/// holds an unreachable host, so that every family is there), every label it selects or groups
/// by is one those series carry, and every query is valid PromQL (promtool checks them as
/// recording rules, Grafana's variables substituted).
final class GrafanaDashboardTests: SpoolTestCase {
    static let dashboardPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("contrib/grafana/spoolfetch-dashboard.json").path

    /// Every `expr` of every panel's targets.
    private func expressions() throws -> [String] {
        let data = try XCTUnwrap(FileManager.default.contents(atPath: Self.dashboardPath), Self.dashboardPath)
        let dashboard = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try XCTUnwrap(dashboard["panels"] as? [[String: Any]])
        return panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
    }

    func testTheDashboardQueriesOnlyMetricsAndLabelsTheDaemonExports() throws {
        let exprs = try expressions()
        XCTAssertGreaterThanOrEqual(exprs.count, 15)
        // A download, an upload, a failure and a host that cannot be reached: every family appears.
        server.serve("/d", body: TestBody.random(count: 5000, seed: 3))
        server.serve("/404", body: [], script: [.status(404)])
        try spool.drop("missing", server.url("/404") + "\n")
        server.acceptUploads("/u")
        try FileManager.default.createDirectory(atPath: spool.path("outgoing"), withIntermediateDirectories: true)
        try Data("up".utf8).write(to: URL(fileURLWithPath: spool.path("outgoing", "up.txt")))
        try spool.drop("fine", "\(server.url("/d"))\nurl: \(server.url("/u"))\nupload: up.txt\n")
        let gone = try TestHTTPServer.start()
        let port = gone.port
        try gone.shutdown()
        try spool.drop("down", "http://127.0.0.1:\(port)/x\n")
        let folder = spool.root + "/collector"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/spoolfetch.prom"
        // With the content store on: its series are there too.
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--metrics-file", path, "--metrics-interval", "1",
                                               "--store", "yes"])
        defer { daemon.terminate() }
        var text = ""
        try DirectoryWaiter.wait(in: folder, timeout: 60, what: "metrics with the upload, the failure and the outage") {
            text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            return text.contains("spoolfetch_sent_bytes_total{") && text.contains("spoolfetch_host_unreachable_since_timestamp_seconds{")
                && text.contains("code=")
        }
        // The names and label names of every series the daemon wrote.
        var labelsOf: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let series = line.prefix { $0 != " " }
            let name = String(series.prefix { $0 != "{" })
            var labels = Set<String>()
            if let brace = series.firstIndex(of: "{") {
                for pair in series[series.index(after: brace)...].dropLast().split(separator: ",") {
                    labels.insert(String(pair.prefix { $0 != "=" }))
                }
            }
            labelsOf[name, default: []].formUnion(labels)
        }
        XCTAssertGreaterThan(labelsOf.count, 20, text)

        let keywords: Set<String> = ["sum", "by", "rate", "increase", "max", "min", "time", "histogram_quantile", "le",
                                     "without", "on", "ignoring", "and", "or", "unless"]
        var used = Set<String>()
        for expr in exprs {
            let names = matches(#"spoolfetch_[a-z_]+"#, in: expr)
            XCTAssertFalse(names.isEmpty, "a query on no spoolfetch metric: \(expr)")
            for name in names {
                used.insert(name)
                XCTAssertNotNil(labelsOf[name], "\(name) (in \(expr)) is not a metric the daemon exports")
            }
            // Labels selected (`{label=…}`) or grouped by (`by (label, …)`) must be the series' own.
            var labels = Set(matches(#"([a-z_]+)\s*(=~|!=|!~|=)\s*""#, in: expr).map { String($0.prefix { $0 != "=" && $0 != "!" && $0 != " " }) })
            for group in matches(#"by \(([a-z_, ]+)\)"#, in: expr) {
                labels.formUnion(group.dropFirst(4).dropLast().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            }
            let available = names.reduce(into: Set<String>()) { $0.formUnion(labelsOf[$1] ?? []) }
            for label in labels.subtracting(keywords) {
                XCTAssertTrue(available.contains(label), "label \(label) in \(expr) is on none of \(names)")
            }
        }
        // The issue's five views are there.
        for needed in ["spoolfetch_received_bytes_total", "spoolfetch_items_queued", "spoolfetch_items_ended_total",
                       "spoolfetch_hosts_unreachable", "spoolfetch_space_waits_total"] {
            XCTAssertTrue(used.contains(needed), "the dashboard shows \(needed)")
        }
        XCTAssertTrue(exprs.contains { $0.contains("by (code)") && $0.contains(#"outcome="failed""#) }, "failures by code")

        // Valid PromQL: each query as a recording rule, Grafana's variables replaced.
        var rules = "groups:\n  - name: dashboard\n    rules:\n"
        for (i, expr) in exprs.enumerated() {
            let plain = expr.replacingOccurrences(of: "$__rate_interval", with: "5m").replacingOccurrences(of: "$worker", with: ".*")
            rules += "      - record: dashboard:query\(i)\n        expr: '\(plain.replacingOccurrences(of: "'", with: "''"))'\n"
        }
        let file = spool.path("tmp", "dashboard-rules.yml")
        try rules.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try MetricsTests.promtool(["check", "rules", file])
        XCTAssertEqual(check.status, 0, check.output)
    }

    private func matches(_ pattern: String, in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
    }
}
