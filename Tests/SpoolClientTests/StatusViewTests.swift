import Foundation
@testable import SpoolClient
import SpoolRequest
import SpoolStore
import XCTest

final class StatusViewTests: XCTestCase {
    private func task(_ id: String, _ state: String, name: String = "file.bin", bytes: Int64 = 0, expected: Int64? = nil,
                      rate: Double? = nil, eta: Double? = nil, error: String? = nil) -> TaskStatus {
        TaskStatus(id: id, request: String(id.prefix { $0 != "#" }), group: "g", name: name, url: "http://h/x", state: state,
                   bytes: bytes, expected: expected, rate: rate, eta: eta, attempts: 2, error: error, startsAt: nil, finishedAt: nil)
    }

    private func overview(_ tasks: [TaskStatus], daemon: Bool = true) -> SpoolOverview {
        let d = DaemonStatus(host: "vm", pid: 4242, version: "0.1.0", spool: "/s", startedAt: "2026-11-23T10:00:00.000Z",
                             updatedAt: "2026-11-23T10:00:01.000Z", running: 1, queued: 0, published: 3, failed: 0, rejected: 0,
                             hooksRunning: 2, hooksWaiting: 1, rate: 1_048_576, eta: 75)
        return SpoolOverview(daemons: daemon ? [d] : [], tasks: tasks, morePending: 0)
    }

    func testASegmentedTaskShowsItsConnectionsBesideItsState() {
        var segmented = task("big#0", "running", bytes: 3 << 20, expected: 6 << 20, rate: 1_048_576, eta: 3)
        segmented.connections = 6
        let table = SpoolOverview.TableLayout(columns: 100, idWidth: 6)
        XCTAssertTrue(table.row(segmented).contains("running x6"), table.row(segmented))
        XCTAssertFalse(table.row(task("one#0", "running")).contains(" x"))
    }

    func testDisplayedURLsLoseTheirQueryAndFragment() {
        XCTAssertEqual(displayURL("http://h/a?token=secret#f"), "http://h/a")
        XCTAssertEqual(displayURL("http://h/%C3%A9/b#frag"), "http://h/%C3%A9/b")
        XCTAssertEqual(displayURL("http://h/plain"), "http://h/plain")
    }

    /// Ids as `add` makes them (30 characters with the item index), at 60, 80 and 120 columns.
    func testRowsFitTheirWidthWithRealisticIDsShortenedInTheMiddle() {
        var waiting = task("add-20261128T073115Z-15812-3#0", "waiting-start", name: "later.bin")
        waiting.startsAt = "2026-11-29T02:00:00Z"
        var paused = task("add-20261128T073115Z-15812-4#0", "paused", name: "paused.iso", bytes: 3 << 20, expected: 6 << 20)
        paused.rate = nil
        let tasks = [
            task("add-20261128T073115Z-15812-1#0", "running", name: "a-very-long-file-name-that-goes-on.csv",
                 bytes: 3 << 20, expected: 6 << 20, rate: 1_048_576, eta: 3),
            task("add-20261128T073115Z-15812-2#0", "failed", name: "gone.bin", error: "http-status: 404 Not Found"),
            waiting, paused,
            task("nightly-2026-11-22#117", "retrying", name: "x.csv", error: "connect: Connection refused"),
            task("add-20261128T073115Z-15812-5#3", "pending", name: "held.bin", error: "connect: host unreachable"),
        ]
        for columns in [60, 80, 120] {
            let table = overview(tasks).table(columns: columns)
            let lines = table.split(separator: "\n").map(String.init)
            let rows = Array(lines.drop { !$0.hasPrefix("ID ") }.dropFirst())
            XCTAssertEqual(rows.count, tasks.count, "one line per task at \(columns):\n\(table)")
            for line in lines.dropFirst(3) { XCTAssertLessThanOrEqual(line.count, columns, "\(columns): \(line)") }
            XCTAssertEqual(lines.filter { $0.hasPrefix("ID ") }.count, 1, "one header line at \(columns):\n\(table)")
            XCTAssertEqual(Set(rows.map { $0.prefix { $0 != " " } }).count, tasks.count, "ids still tell apart:\n\(table)")
            XCTAssertTrue(rows[1].contains("http-status: 404"), "a failed row's reason at \(columns):\n\(table)")
            XCTAssertTrue(rows[2].contains("starts 2026-11-29T02:00"), "why it waits at \(columns):\n\(table)")
            XCTAssertTrue(rows[3].contains("3.0M/6.0M") && rows[3].contains("50%"), "a paused row keeps its progress:\n\(table)")
            XCTAssertTrue(rows[0].contains("3.0M/6.0M"), table)
            XCTAssertTrue(rows[5].contains("held: connect"), "a held row says by what:\n\(table)")
        }
        let at80 = overview(tasks).table(columns: 80)
        XCTAssertTrue(at80.contains("\nadd"), at80)
        XCTAssertTrue(at80.contains("…"), "shortened in the middle at 80:\n\(at80)")
        XCTAssertTrue(at80.contains("-1#0 "), "the item index stays:\n\(at80)")
        XCTAssertTrue(at80.contains("1.0M/s"), at80)
        XCTAssertTrue(at80.contains("  1.0M/s, ETA 1m15s; hooks: 2 running, 1 waiting\n"), at80)
        let at120 = overview(tasks).table(columns: 120)
        for t in tasks { XCTAssertTrue(at120.contains(t.id + " "), "whole at 120:\n\(at120)") }
        let wide = overview(tasks).table(columns: 60, wide: true)
        for t in tasks { XCTAssertTrue(wide.contains("\n" + t.id + " "), "--wide prints ids whole:\n\(wide)") }

        let short = overview([task("r#0", "running", name: "report.csv", rate: 1000)]).table(columns: 80)
        XCTAssertTrue(short.contains("report.csv"), short)
        XCTAssertTrue(short.contains("\nr#0 "), short)
    }

    /// `status --all` prints rows after the header that the report did not hold (no daemon: none
    /// at all): the id column is sized for them too, so `dh2#0` is never cut to `d…`.
    func testRowsStreamedAfterTheHeaderKeepTheirIDsWhole() {
        let empty = overview([], daemon: false)
        let layout = SpoolOverview.TableLayout(columns: 120, tasks: empty.tasks, longestID: "dh2#0".count)
        XCTAssertTrue(layout.row(task("dh2#0", "pending")).hasPrefix("dh2#0 "), layout.row(task("dh2#0", "pending")))
        XCTAssertTrue(empty.table(columns: 120, longestID: 5).contains("\nID    STATE"), empty.table(columns: 120, longestID: 5))
        // Too narrow for a long id: the same rule as with a daemon (shortened in the middle).
        let long = "add-20261128T073115Z-15812-5#3"
        let narrow = SpoolOverview.TableLayout(columns: 40, tasks: [], longestID: long.count)
        let id = String(narrow.row(task(long, "pending")).prefix { $0 != " " })
        XCTAssertEqual(id, SpoolOverview.shortened(long, to: id.count))
        XCTAssertTrue(id.contains("…") && id.hasSuffix("-5#3"), id)
    }

    /// With no daemon, what the last drain left is shown, labelled as such.
    func testTheLastDrainIsShownWhenNoDaemonRuns() {
        var o = overview([task("dh2#0", "pending")], daemon: false)
        o.lastDrains = [DrainRecord(
            worker: "vm-77", host: "vm", pid: 77, version: "0.1.0", mode: "due", startedAt: "2026-11-23T02:00:00.000Z",
            endedAt: "2026-11-23T02:00:05.000Z", exitStatus: 75, exitMeaning: "items left for unreachable hosts or space; the next run takes them",
            published: 1, failed: 0, rejected: 0, left: 1, leftForHosts: 1, leftForSpace: 0,
            unreachableHosts: [UnreachableHost(host: "127.0.0.1:9", since: "2026-11-23T02:00:01.000Z", lastError: "connect: refused",
                                               failures: 1, nextProbe: "2026-11-23T02:00:31.000Z")],
            itemsLeft: [], moreLeft: 0)]
        let table = o.table(columns: 120)
        XCTAssertTrue(table.contains("no daemon is running on this spool\nlast drain at 2026-11-23T02:00:05.000Z ("), table)
        XCTAssertTrue(table.contains("exit 75: items left for unreachable hosts"), table)
        XCTAssertTrue(table.contains("  1 published, 0 failed, 0 rejected; 1 left (1 for unreachable hosts, 0 for space)"), table)
        XCTAssertTrue(table.contains("  host 127.0.0.1:9 unreachable since 2026-11-23T02:00:01.000Z, next probe 2026-11-23T02:00:31.000Z"), table)
        XCTAssertTrue(o.json().contains("\"lastDrains\":[{"), o.json())
        XCTAssertEqual(o.heldHostsFromDrains.keys.sorted(), ["127.0.0.1:9"])
        XCTAssertFalse(overview([]).json().contains("lastDrains"), "a live daemon's overview has none")
    }

    func testTheDaemonLineSaysTheRateInForceAndUntilWhen() {
        var o = overview([])
        XCTAssertFalse(o.table(columns: 80).contains("max-rate"), "no cap: nothing said")
        o.daemons[0].maxRate = 256 << 10
        o.daemons[0].maxRateUntil = "2026-11-23T20:00:00Z"
        XCTAssertTrue(o.table(columns: 80).contains("; max-rate 256K/s until 2026-11-23T20:00:00Z;"), o.table(columns: 80))
        o.daemons[0].maxRate = 0
        o.daemons[0].maxRateUntil = "2026-11-24T08:00:00Z"
        XCTAssertTrue(o.table(columns: 80).contains("max-rate none until 2026-11-24T08:00:00Z"), o.table(columns: 80))
    }

    /// An old report is never passed off as current: its age is shown, and a report that says
    /// transfers run but has not been rewritten for 10 s is marked stale (text and JSON).
    func testAnOldReportShowsItsAgeAndAStaleOneSaysSo() throws {
        var o = overview([task("r#0", "running", bytes: 9 << 20)])
        let written = try XCTUnwrap(RFC3339.parse(o.daemons[0].updatedAt))
        o.daemons[0] = SpoolOverview.aged(o.daemons[0], now: written.addingTimeInterval(1))
        XCTAssertEqual(o.daemons[0].stale, false)
        XCTAssertFalse(o.table(columns: 120).contains("STALE"), o.table(columns: 120))
        o.daemons[0] = SpoolOverview.aged(o.daemons[0], now: written.addingTimeInterval(95))
        XCTAssertEqual(o.daemons[0].stale, true)
        XCTAssertEqual(o.daemons[0].reportAgeSeconds, 95)
        let text = o.table(columns: 120)
        XCTAssertTrue(text.contains("report 1m35s old") || text.contains("report 95s old"), text)
        XCTAssertTrue(text.contains("STALE: not rewritten for"), text)
        XCTAssertTrue(o.json().contains("\"stale\":true"), o.json())
        XCTAssertTrue(o.json().contains("\"reportAgeSeconds\":95"), o.json())
        // An idle daemon writes no report while nothing changes: old, but not stale.
        o.daemons[0].running = 0
        o.daemons[0] = SpoolOverview.aged(o.daemons[0], now: written.addingTimeInterval(3600))
        XCTAssertEqual(o.daemons[0].stale, false)
    }

    func testAScreenNeverTallerOrWiderThanItsWindowKeepsTheTopAndCountsTheRest() {
        let tasks = (0..<40).map { task("req#\($0)", $0 < 4 ? "running" : "pending", bytes: 1 << 20, expected: 4 << 20) }
        var o = overview(tasks)
        o.morePending = 5
        for (columns, rows) in [(110, 30), (80, 12), (60, 12), (40, 8), (20, 3)] {
            let lines = o.screen(columns: columns, rows: rows)
            XCTAssertLessThanOrEqual(lines.count, rows, "\(columns) × \(rows)")
            XCTAssertTrue(lines.allSatisfy { $0.count <= columns }, "\(columns) × \(rows): \(lines)")
            XCTAssertTrue(lines[0].hasPrefix("daemon vm"), "\(lines)")
        }
        let lines = o.screen(columns: 110, rows: 30)
        XCTAssertEqual(lines.count, 30)
        XCTAssertTrue(lines[3].hasPrefix("ID "), "the header under the daemon's lines: \(lines)")
        let rows = lines.filter { $0.hasPrefix("req#") }.count
        XCTAssertEqual(lines.last, "… and \(40 - rows + 5) more")
        XCTAssertEqual(rows, 30 - 4 - 1)
        // Everything fits: no "… and" line.
        let small = overview(Array(tasks.prefix(3))).screen(columns: 110, rows: 30)
        XCTAssertEqual(small.filter { $0.hasPrefix("req#") }.count, 3)
        XCTAssertFalse(small.contains { $0.hasPrefix("…") })
    }

    func testTheETASaysWhenSizesAreUnknown() {
        var d = overview([]).daemons[0]
        d.unknownSizes = 33
        XCTAssertEqual(SpoolOverview.eta(d), ", ETA 1m15s + 33 of unknown size")
        d.eta = nil
        XCTAssertEqual(SpoolOverview.eta(d), ", ETA unknown (33 of unknown size)")
        d.unknownSizes = nil
        XCTAssertEqual(SpoolOverview.eta(d), "")
    }

    func testPlainOutputHasAHeaderAndOneTaskPerLine() {
        let plain = overview([task("r#0", "running", bytes: 10, expected: 20, rate: 5.5, eta: 2.4, error: "a\tb")]).plainLines()
        let lines = plain.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines[0], "ID\tSTATE\tNAME\tURL\tBYTES\tEXPECTED\tRATE\tETA\tATTEMPTS\tERROR")
        XCTAssertEqual(lines[1], "r#0\trunning\tfile.bin\thttp://h/x\t10\t20\t5\t2\t2\ta b")
        XCTAssertEqual(overview([], daemon: false).plainLines(), "ID\tSTATE\tNAME\tURL\tBYTES\tEXPECTED\tRATE\tETA\tATTEMPTS\tERROR\n")
        XCTAssertTrue(overview([], daemon: false).table().contains("no daemon is running on this spool"))
    }

    func testHumanSizesAndDurationsAreShort() {
        XCTAssertEqual(SpoolOverview.human(999), "999B")
        XCTAssertEqual(SpoolOverview.human(1536), "1.5K")
        XCTAssertEqual(SpoolOverview.human(1023 * 1024), "1.0M")
        XCTAssertEqual(SpoolOverview.human(50 << 20), "50M")
        XCTAssertEqual(SpoolOverview.duration(7), "7s")
        XCTAssertEqual(SpoolOverview.duration(185), "3m05s")
        XCTAssertEqual(SpoolOverview.duration(7620), "2h07m")
        XCTAssertEqual(SpoolOverview.duration(.infinity), "")
    }

    func testControlIDs() throws {
        XCTAssertEqual(try ControlID(parsing: "nightly#3").request, "nightly")
        XCTAssertEqual(try ControlID(parsing: "nightly#3").index, 3)
        XCTAssertEqual(try ControlID(parsing: "nightly").request, "nightly")
        XCTAssertNil(try ControlID(parsing: "nightly").index)
        XCTAssertEqual(try ControlID(parsing: "a-b.c#0").index, 0)
        for bad in ["slow#x", "slow#", "#3", "", "../x", "a/b#1", ".hidden", "slow#-1", "slow#1#2", "slow#99999999999"] {
            XCTAssertThrowsError(try ControlID(parsing: bad), bad) { error in
                guard case OperatorError.malformedID = error else { return XCTFail("\(bad): \(error)") }
            }
        }
        XCTAssertThrowsError(try ControlID(parsing: "slow#x")) {
            XCTAssertTrue("\($0)".contains("the part after # must be an item index"), "\($0)")
        }
    }
}
