import Foundation
import SpoolStore

/// The three ways `spoolfetch status` prints a `SpoolOverview`: JSON, tab-separated lines with a
/// header (for scripts and pipes), and a table that fits the terminal.
extension SpoolOverview {
    /// `{"daemons": […], "tasks": […], "morePending": N}` on one line.
    public func json() -> String {
        struct Shape: Encodable { var daemons: [DaemonStatus]; var lastDrains: [DrainRecord]?; var tasks: [TaskStatus]; var morePending: Int }
        return String(decoding: SpoolJSON.encode(Shape(daemons: daemons, lastDrains: lastDrains, tasks: tasks, morePending: morePending)),
                      as: UTF8.self)
    }

    /// `--all --json`: the same document as `json()`, written as it goes — the daemons and the
    /// live tasks, then each task `more` emits, then the closing brackets — so a million waiting
    /// items are never held as one string. `write` gets each piece.
    public func streamJSON(write: (String) -> Void, more: ((TaskStatus) -> Void) -> Void) {
        func encoded<T: Encodable>(_ value: T) -> String { String(decoding: SpoolJSON.encode(value), as: UTF8.self) }
        let drains = lastDrains.map { ",\"lastDrains\":" + encoded($0) } ?? ""
        write("{\"daemons\":" + encoded(daemons) + drains + ",\"morePending\":0,\"tasks\":[")
        var first = true
        let emit = { (t: TaskStatus) in
            write((first ? "" : ",") + encoded(t))
            first = false
        }
        tasks.forEach(emit)
        more(emit)
        write("]}\n")
    }

    /// The columns of `plainLines()`, in order.
    public static let plainHeader = ["ID", "STATE", "NAME", "URL", "BYTES", "EXPECTED", "RATE", "ETA", "ATTEMPTS", "ERROR"]

    /// A header line, then one tab-separated line per task (sizes in bytes, rate in bytes per
    /// second, ETA in seconds, `-` when unknown). Tabs and newlines inside a field become spaces.
    /// `wide` (`status --wide`): an OWNER column at the end, the request's owner.
    public func plainLines(wide: Bool = false) -> String {
        var out = (Self.plainHeader + (wide ? ["OWNER"] : [])).joined(separator: "\t") + "\n"
        for t in tasks { out += Self.plainLine(t, wide: wide) }
        return out
    }

    /// One task as `plainLines()` prints it, newline included.
    public static func plainLine(_ t: TaskStatus, wide: Bool = false) -> String {
        let fields = [t.id, t.state, t.name, t.url, "\(t.bytes)", t.expected.map(String.init) ?? "-",
                      t.rate.map { String(Int($0)) } ?? "-", t.eta.map { String(Int($0.rounded())) } ?? "-",
                      "\(t.attempts)", t.error ?? t.waitingFor ?? ""] + (wide ? [t.owner ?? "-"] : [])
        return fields.map { $0.map { $0 == "\t" || $0.isNewline ? " " : $0 }.reduce(into: "") { $0.append($1) } }
            .joined(separator: "\t") + "\n"
    }

    /// A table for a terminal `columns` wide: every row one line that fits (see `TableLayout`).
    /// Sizes and rates use K/M/G (powers of 1024). `withMore`: end with the "… and N more
    /// pending" line (`status --all` lists them instead). `wide`: ids whole, however wide.
    /// `longestID`: the longest id of rows printed after it (`status --all` streams them), so
    /// that the column is sized for them too.
    public func table(columns: Int = 80, withMore: Bool = true, wide: Bool = false, longestID: Int = 0) -> String {
        var out = daemonLines().map { $0 + "\n" }.joined()
        let layout = TableLayout(columns: columns, tasks: tasks, wide: wide, longestID: longestID)
        out += layout.header
        for t in tasks { out += layout.row(t) }
        if withMore && morePending > 0 { out += "… and \(morePending) more pending\n" }
        return out
    }

    /// The lines above the table: each daemon's counts, rate, ETA, cap, hooks and troubles.
    func daemonLines() -> [String] {
        var out: [String] = []
        for d in daemons {
            out.append("daemon \(d.host) pid \(d.pid), up since \(d.startedAt)"
                       + (d.reportAgeSeconds.map { $0 >= 2 ? ", report \(Self.duration(Double($0))) old" : "" } ?? ""))
            if d.stale == true {
                out.append("  STALE: not rewritten for \(Self.duration(Double(d.reportAgeSeconds ?? 0))) while it says transfers run: "
                           + "the daemon cannot write status/ (a full disk?) or is stopped; what follows may no longer hold")
            }
            out.append("  \(d.running) running, \(d.queued) queued, \(d.published) published, \(d.failed) failed, \(d.rejected) rejected")
            var more: [String] = []
            if let rate = d.rate { more.append("\(Self.human(Int64(rate)))/s" + Self.eta(d)) }
            if let cap = d.maxRate {
                more.append("max-rate " + (cap > 0 ? "\(Self.human(cap))/s" : "none") + (d.maxRateUntil.map { " until \($0)" } ?? ""))
            }
            if let hooks = d.hooksRunning, hooks > 0 || (d.hooksWaiting ?? 0) > 0 {
                more.append("hooks: \(hooks) running" + ((d.hooksWaiting ?? 0) > 0 ? ", \(d.hooksWaiting!) waiting" : ""))
            }
            if !more.isEmpty { out.append("  " + more.joined(separator: "; ")) }
            if let trouble = d.watcher { out.append("  watcher: \(trouble)") }
            for warning in d.urlExpiryWarnings ?? [] { out.append("  url expiry: \(warning)") }
            for h in d.unreachableHosts ?? [] {
                out.append("  host \(h.host) unreachable since \(h.since), next probe \(h.nextProbe)")
                out.append("    last error: \(h.lastError)")
            }
        }
        if daemons.isEmpty { out += ["no daemon is running on this spool"] + drainLines() }
        return out
    }

    /// `status --watch` on a terminal: the table cut to a window `columns` × `rows`, like `top`.
    /// The daemon lines and the column header stay; task rows follow while they fit, and the
    /// last line says how many more there are (`… and N more`); every line is cut to the width,
    /// so nothing wraps and the screen never scrolls.
    public func screen(columns: Int, rows: Int) -> [String] {
        let width = max(1, columns)
        func fit(_ line: Substring) -> String { String(line.prefix(width)) }
        let layout = TableLayout(columns: width, tasks: tasks, wide: false)
        let top = (daemonLines() + [String(layout.header.dropLast())]).map { fit(Substring($0)) }
        guard top.count < rows else { return Array(top.prefix(max(0, rows))) }
        let room = rows - top.count
        var shown: [String] = []
        var count = 0
        for (i, t) in tasks.enumerated() {
            let lines = layout.row(t).split(separator: "\n").map(fit)
            let leftAfter = tasks.count - i - 1 + morePending
            if shown.count + lines.count + (leftAfter > 0 ? 1 : 0) > room { break }
            shown += lines
            count += 1
        }
        let left = tasks.count - count + morePending
        if left > 0 { shown.append(fit("… and \(left) more")) }
        return top + shown
    }

    /// `, ETA 3m05s`; with items of unknown size `, ETA 3m05s + 33 of unknown size`, or `, ETA
    /// unknown (33 of unknown size)` when nothing left has a size; empty when nothing is left.
    static func eta(_ d: DaemonStatus) -> String {
        let unknown = d.unknownSizes ?? 0
        switch (d.eta, unknown) {
        case (let eta?, 0): return ", ETA \(duration(eta))"
        case (let eta?, _): return ", ETA \(duration(eta)) + \(unknown) of unknown size"
        case (nil, 0): return ""
        case (nil, _): return ", ETA unknown (\(unknown) of unknown size)"
        }
    }

    /// The table's columns for one terminal width. Every row is one line: ID and STATE always,
    /// then, while they fit, BYTES (done/total), % , RATE, ETA, NAME and TRY; room left over
    /// widens ID up to the longest id, then NAME. An id too long for its column is shortened in
    /// the middle (`add…5812-1#0`): its start and its end (the item index) are what tell ids
    /// apart; `--wide` prints them whole. A failed, retrying or waiting row says why in the room
    /// its progress would take (a failure's reason, when a waiting item starts).
    public struct TableLayout: Sendable {
        let columns: Int
        let idWidth: Int
        let nameWidth: Int
        let shown: Set<Column>
        /// `--wide`: the OWNER column after STATE, as wide as the longest owner.
        let ownerWidth: Int?

        enum Column: Hashable { case bytes, percent, rate, eta, name, tries }

        static let bytesWidth = 11      // "1023M/1023M"
        static let percentWidth = 4     // "100%"
        static let minimumID = 12
        static let minimumName = 8

        /// `longestID`: ids of rows that are not in `tasks` (streamed after the header) count
        /// too; without it they would be cut to the column `tasks` alone made (`d…` for `dh2#0`).
        public init(columns: Int, tasks: [TaskStatus], wide: Bool = false, longestID: Int = 0) {
            self.columns = columns
            let longestID = max(2, tasks.map(\.id.count).max() ?? 2, longestID)
            let longestName = max(4, tasks.map(\.name.count).max() ?? 4)
            ownerWidth = wide ? max(5, tasks.map { ($0.owner ?? "-").count }.max() ?? 5) : nil
            var used = (wide ? longestID : min(longestID, Self.minimumID)) + 1 + SpoolOverview.stateWidth
                + (ownerWidth.map { $0 + 1 } ?? 0)
            var shown: Set<Column> = []
            let wanted: [(Column, Int)] = [(.bytes, Self.bytesWidth), (.percent, Self.percentWidth),
                                           (.rate, SpoolOverview.rateWidth), (.eta, SpoolOverview.etaWidth),
                                           (.name, Self.minimumName), (.tries, 3)]
            for (column, width) in wanted where used + 1 + width <= columns {
                shown.insert(column)
                used += 1 + width
            }
            var left = max(0, columns - used)
            var idWidth = wide ? longestID : min(longestID, Self.minimumID)
            let grow = min(left, longestID - idWidth)
            idWidth += max(0, grow)
            left -= max(0, grow)
            self.idWidth = idWidth
            nameWidth = shown.contains(.name) ? Self.minimumName + min(left, max(0, longestName - Self.minimumName)) : 0
            self.shown = shown
        }

        /// The layout `init(columns:tasks:)` makes for ids of `idWidth` characters.
        public init(columns: Int, idWidth: Int) {
            self.init(columns: columns, tasks: [TaskStatus(id: String(repeating: "x", count: idWidth), request: "", group: "",
                                                           name: "", url: "", state: "", bytes: 0, expected: nil, rate: nil,
                                                           eta: nil, attempts: 0, error: nil, startsAt: nil, finishedAt: nil)])
        }

        public var header: String {
            cells(id: "ID", state: "STATE", owner: "OWNER", name: "NAME", progress: nil, bytes: "BYTES", percent: "%", rate: "RATE",
                  eta: "ETA", tries: "TRY") + "\n"
        }

        /// One task's row, newline included.
        public func row(_ t: TaskStatus) -> String {
            let state = t.connections.map { "\(t.state) x\($0)" } ?? t.state
            let why = SpoolOverview.reason(t)
            return cells(id: SpoolOverview.shortened(t.id, to: idWidth), state: state, owner: t.owner ?? "-", name: t.name, progress: why,
                         bytes: SpoolOverview.bytesDone(t), percent: SpoolOverview.percent(t),
                         rate: t.rate.map { SpoolOverview.human(Int64($0)) + "/s" } ?? "",
                         eta: t.eta.map { SpoolOverview.duration($0) } ?? "", tries: "\(t.attempts)") + "\n"
        }

        /// `reason`, when given, takes the place of the progress cells (BYTES to ETA).
        private func cells(id: String, state: String, owner: String, name: String, progress reason: String?, bytes: String,
                           percent: String, rate: String, eta: String, tries: String) -> String {
            var text = pad(id, idWidth, cut: true) + " " + pad(state, SpoolOverview.stateWidth, cut: true)
            if let ownerWidth { text += " " + pad(owner, ownerWidth) }
            var progress: [String] = []
            if shown.contains(.bytes) { progress.append(padLeft(bytes, Self.bytesWidth)) }
            if shown.contains(.percent) { progress.append(padLeft(percent, Self.percentWidth)) }
            if shown.contains(.rate) { progress.append(padLeft(rate, SpoolOverview.rateWidth)) }
            if shown.contains(.eta) { progress.append(padLeft(eta, SpoolOverview.etaWidth)) }
            let progressWidth = progress.map(\.count).reduce(0, +) + max(0, progress.count - 1)
            if progressWidth > 0 {
                text += " " + (reason.map { pad($0, progressWidth, cut: true) } ?? progress.joined(separator: " "))
            }
            if shown.contains(.name) { text += " " + pad(name, nameWidth, cut: true) }
            if shown.contains(.tries) { text += " " + padLeft(tries, 3) }
            // A reason with no progress cells to stand in: after the row, if anything is left.
            if progressWidth == 0, let reason, columns - text.count >= 10 {
                text += " " + pad(reason, columns - text.count - 1, cut: true)
            }
            while text.last == " " { text.removeLast() }
            return text
        }
    }

    static let stateWidth = 14      // "waiting-window"
    static let rateWidth = 8        // "1023.9K/s" rounds to "1023K/s"
    static let etaWidth = 6         // "59m59s", "99h59m"

    /// `id` cut in the middle to `width` characters: a third of its start and two of its end
    /// stay, since generated names (`add-STAMP-PID-N`) differ at the end, as do item indexes.
    static func shortened(_ id: String, to width: Int) -> String {
        guard id.count > width, width >= 5 else { return id }
        let head = max(2, (width - 1) / 3)
        return String(id.prefix(head)) + "…" + String(id.suffix(width - 1 - head))
    }

    /// `3.0M/6.0M` when the size is known, else the bytes so far.
    static func bytesDone(_ t: TaskStatus) -> String {
        guard let e = t.expected, e > 0 else { return t.bytes > 0 ? human(t.bytes) : "" }
        return human(t.bytes) + "/" + human(e)
    }

    /// `61%` when the size is known (a paused item's too: its partial is kept).
    static func percent(_ t: TaskStatus) -> String {
        guard let e = t.expected, e > 0 else { return "" }
        return "\(Int(min(1, Double(t.bytes) / Double(e)) * 100))%"
    }

    /// Why a row is not moving: a failure's or a retry's reason, when a waiting item may start.
    static func reason(_ t: TaskStatus) -> String? {
        switch t.state {
        case "failed": return t.error ?? "failed"
        // The last error, and when the next try is due.
        case "retrying": return [t.error ?? "retrying", t.startsAt.map { "next try \($0)" }].compactMap { $0 }.joined(separator: "; ")
        case "waiting-start": return t.startsAt.map { "starts \($0)" } ?? "waits for its earliest start"
        case "waiting-window": return t.waitingFor ?? "waits for the discretionary window"
        case "waiting-space": return t.waitingFor ?? t.error ?? "waits for free disk space"
        case "waiting-store": return t.waitingFor ?? "waits for another fetch of its sha256"
        case "paused": return t.waitingFor
        case "queued": return "in incoming/, not claimed yet"
        // Due, held back by its host (an outage, a 429/503 pause): the host and until when, else
        // the last error.
        case "pending": return t.waitingFor ?? t.error.map { "held: \($0)" }
        default: return nil
        }
    }

    /// `512B`, `1.5K`, `12M`, `3.2G`: at most 5 characters below 1,000 TiB.
    public static func human(_ bytes: Int64) -> String {
        let units = ["B", "K", "M", "G", "T", "P"]
        var value = Double(bytes), unit = 0
        while value >= 1000 && unit < units.count - 1 { value /= 1024; unit += 1 }
        if unit == 0 { return "\(bytes)B" }
        return (value < 10 ? String(format: "%.1f", value) : String(format: "%.0f", value)) + units[unit]
    }

    /// `7s`, `3m05s`, `2h07m`, `3d04h`.
    public static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "" }
        let s = Int(seconds.rounded())
        if s >= 86400 { return "\(s / 86400)d" + String(format: "%02dh", s % 86400 / 3600) }
        if s >= 3600 { return "\(s / 3600)h" + String(format: "%02dm", s % 3600 / 60) }
        if s >= 60 { return "\(s / 60)m" + String(format: "%02ds", s % 60) }
        return "\(s)s"
    }
}

private func pad(_ s: String, _ width: Int, cut: Bool = false) -> String {
    if s.count > width && cut { return String(s.prefix(max(0, width - 1))) + "…" }
    return s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
}

private func padLeft(_ s: String, _ width: Int) -> String {
    s.count >= width ? s : String(repeating: " ", count: width - s.count) + s
}
