import Foundation
import SpoolStore

/// The three ways `spoolfetch status` prints a `SpoolOverview`: JSON, tab-separated lines with a
/// header (for scripts and pipes), and a table that fits the terminal.
extension SpoolOverview {
    /// `{"daemons": […], "tasks": […], "morePending": N}` on one line.
    public func json() -> String {
        struct Shape: Encodable { var daemons: [DaemonStatus]; var tasks: [TaskStatus]; var morePending: Int }
        return String(decoding: SpoolJSON.encode(Shape(daemons: daemons, tasks: tasks, morePending: morePending)), as: UTF8.self)
    }

    /// `--all --json`: the same document as `json()`, written as it goes — the daemons and the
    /// live tasks, then each task `more` emits, then the closing brackets — so a million waiting
    /// items are never held as one string. `write` gets each piece.
    public func streamJSON(write: (String) -> Void, more: ((TaskStatus) -> Void) -> Void) {
        func encoded<T: Encodable>(_ value: T) -> String { String(decoding: SpoolJSON.encode(value), as: UTF8.self) }
        write("{\"daemons\":" + encoded(daemons) + ",\"morePending\":0,\"tasks\":[")
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
    public func plainLines() -> String {
        var out = Self.plainHeader.joined(separator: "\t") + "\n"
        for t in tasks { out += Self.plainLine(t) }
        return out
    }

    /// One task as `plainLines()` prints it, newline included.
    public static func plainLine(_ t: TaskStatus) -> String {
        let fields = [t.id, t.state, t.name, t.url, "\(t.bytes)", t.expected.map(String.init) ?? "-",
                      t.rate.map { String(Int($0)) } ?? "-", t.eta.map { String(Int($0.rounded())) } ?? "-",
                      "\(t.attempts)", t.error ?? ""]
        return fields.map { $0.map { $0 == "\t" || $0.isNewline ? " " : $0 }.reduce(into: "") { $0.append($1) } }
            .joined(separator: "\t") + "\n"
    }

    /// A table for a terminal `columns` wide. IDs are never shortened (two ids that differ only
    /// at the end must stay tellable apart); the NAME column takes what is left, and goes when
    /// nothing is left. Sizes and rates use K/M/G (powers of 1024). `withMore`: end with the
    /// "… and N more pending" line (`status --all` lists them instead).
    public func table(columns: Int = 80, withMore: Bool = true) -> String {
        var out = daemonLines().map { $0 + "\n" }.joined()
        let layout = TableLayout(columns: columns, idWidth: max(2, tasks.map(\.id.count).max() ?? 2))
        out += layout.header
        for t in tasks { out += layout.row(t) }
        if withMore && morePending > 0 { out += "… and \(morePending) more pending\n" }
        return out
    }

    /// The lines above the table: each daemon's counts, rate, ETA, cap, hooks and troubles.
    func daemonLines() -> [String] {
        var out: [String] = []
        for d in daemons {
            out.append("daemon \(d.host) pid \(d.pid), up since \(d.startedAt)")
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
        if daemons.isEmpty { out.append("no daemon is running on this spool") }
        return out
    }

    /// `status --watch` on a terminal: the table cut to a window `columns` × `rows`, like `top`.
    /// The daemon lines and the column header stay; task rows follow while they fit, and the
    /// last line says how many more there are (`… and N more`); every line is cut to the width,
    /// so nothing wraps and the screen never scrolls.
    public func screen(columns: Int, rows: Int) -> [String] {
        let width = max(1, columns)
        func fit(_ line: Substring) -> String { String(line.prefix(width)) }
        let layout = TableLayout(columns: width, idWidth: max(2, tasks.map(\.id.count).max() ?? 2))
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

    /// The table's columns for one terminal width: STATE, PROGRESS, RATE, ETA and TRY after the
    /// id; NAME takes what is left. Ids too long to leave room for a name go on a line of their own.
    public struct TableLayout: Sendable {
        let columns: Int
        let idWidth: Int
        let idInline: Bool
        let nameWidth: Int
        var showName: Bool { nameWidth >= SpoolOverview.minimumName }

        public init(columns: Int, idWidth: Int) {
            self.columns = columns
            self.idWidth = idWidth
            let after = SpoolOverview.stateWidth + 1 + SpoolOverview.progressWidth + 1 + SpoolOverview.rateWidth + 1
                + SpoolOverview.etaWidth + 1 + 3
            idInline = columns - (idWidth + 1) - after - 1 >= SpoolOverview.minimumName
            nameWidth = columns - (idInline ? idWidth + 1 : 2) - after - 1
        }

        public var header: String { line("ID", "STATE", "NAME", "PROGRESS", "RATE", "ETA", "TRY") + "\n" }

        /// One task's row (two lines when the id does not fit inline), newline included.
        public func row(_ t: TaskStatus) -> String {
            let state = t.connections.map { "\(t.state) x\($0)" } ?? t.state
            var text = line(t.id, state, t.name, SpoolOverview.progress(t), t.rate.map { SpoolOverview.human(Int64($0)) + "/s" } ?? "",
                            t.eta.map { SpoolOverview.duration($0) } ?? "", "\(t.attempts)")
            if let error = t.error, t.state == "failed" || t.state == "retrying" {
                let lastLine = text.split(separator: "\n").last.map(String.init) ?? text
                let room = columns - lastLine.count - 2
                if room >= 8 { text += "  " + pad(error, room, cut: true).trimmingCharacters(in: .whitespaces) }
            }
            return text + "\n"
        }

        private func line(_ id: String, _ state: String, _ name: String, _ progress: String, _ rate: String, _ eta: String,
                          _ tries: String) -> String {
            var text = idInline ? pad(id, idWidth) + " " : id + "\n  "
            text += pad(state, SpoolOverview.stateWidth) + " "
            if showName { text += pad(name, nameWidth, cut: true) + " " }
            return text + pad(progress, SpoolOverview.progressWidth) + " " + padLeft(rate, SpoolOverview.rateWidth) + " "
                + padLeft(eta, SpoolOverview.etaWidth) + " " + padLeft(tries, 3)
        }
    }

    static let minimumName = 6
    static let stateWidth = 14      // "waiting-window"
    static let progressWidth = 12   // "[#####] 100%"
    static let rateWidth = 8        // "1023.9K/s" rounds to "1023K/s"
    static let etaWidth = 6         // "59m59s", "99h59m"

    /// `[###..] 61%` when the size is known, else the bytes so far.
    static func progress(_ t: TaskStatus) -> String {
        guard let e = t.expected, e > 0 else { return t.bytes > 0 ? human(t.bytes) : "" }
        let fraction = min(1, Double(t.bytes) / Double(e))
        let filled = Int((fraction * 5).rounded(.down))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 5 - filled) + "] "
            + String(format: "%3d%%", Int(fraction * 100))
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
