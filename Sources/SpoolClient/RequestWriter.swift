import Foundation
import Synchronization
import SpoolRequest
import SpoolStore

/// What `spoolfetch add` puts into one request file.
public struct AddRequest: Sendable {
    public var url: String
    public var name: String?
    public var earliestStart: String?
    public var expectedBytes: String?
    public var maxBytes: String?
    public var sha256: String?
    public var priority: String?
    public var discretionary: Bool = false
    public var group: String?
    public var headers: [String] = []
    /// An upload item: the file's name in `outgoing/`, the method and the content type.
    public var upload: String?
    public var method: String?
    public var contentType: String?

    public init(url: String) { self.url = url }

    /// The request file's text. Values are written as given; the parser then judges them, so
    /// `add` accepts exactly what a dropped file would.
    public var text: String {
        var lines: [String] = []
        if let group { lines.append("group: \(group)") }
        lines.append("url: \(url)")
        if let name { lines.append("name: \(name)") }
        if let earliestStart { lines.append("earliest-start: \(earliestStart)") }
        if let expectedBytes { lines.append("expected-bytes: \(expectedBytes)") }
        if let maxBytes { lines.append("max-bytes: \(maxBytes)") }
        if let sha256 { lines.append("sha256: \(sha256)") }
        if let priority { lines.append("priority: \(priority)") }
        if discretionary { lines.append("discretionary: yes") }
        for header in headers { lines.append("header: \(header)") }
        if let upload { lines.append("upload: \(upload)") }
        if let method { lines.append("method: \(method)") }
        if let contentType { lines.append("content-type: \(contentType)") }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Why `add` refused.
public enum AddError: Error, CustomStringConvertible {
    /// A value contains a line break, which would smuggle in another key.
    case lineBreak(field: String)
    case invalid(RequestRejection)
    case spool(StoreError)

    public var description: String {
        switch self {
        case .lineBreak(let field): return "\(field) must not contain a line break"
        case .invalid(let r): return "\(r.message) (rule \(r.rule))"
        case .spool(let e): return "cannot write the request: \(e)"
        }
    }
}

/// Validates a request the way the daemon will, then writes it like a well-behaved producer:
/// into `tmp/`, fsync, rename into `incoming/` (never over an existing file).
///
/// The name is the one the daemon's claim keeps, and its group marker is named after it
/// (`GroupMarkerNames`), so `groupMarkerPath` is known before the daemon has seen the file:
/// `add-STAMP-PID-N` for the default group; with a group, the group's name (`G`, or `G~N` when
/// a request of that name was queued, claimed or has ended).
public enum RequestWriter {
    /// Returns the request file's name in `incoming/`. `finalFolder`: the daemon's, when not
    /// `SPOOL/final` (a marker there holds a name).
    ///
    /// `named`: the request file's name exactly (a plain name), for a program that must find its
    /// request again by a name it derives itself; an `EEXIST` `.spool` error when a request of
    /// that name is queued already (see `SpoolSession.downloadTask(with:named:)`).
    public static func add(_ request: AddRequest, spool: String, finalFolder: String? = nil,
                           named fixed: String? = nil) throws(AddError) -> String {
        let fields: [(String, String?)] = [
            ("URL", request.url), ("--name", request.name), ("--earliest-start", request.earliestStart),
            ("--expected-bytes", request.expectedBytes), ("--max-bytes", request.maxBytes),
            ("--sha256", request.sha256), ("--priority", request.priority), ("--group", request.group),
            ("upload", request.upload), ("method", request.method), ("content-type", request.contentType),
        ] + request.headers.map { ("--header", $0) }
        for (field, value) in fields {
            if let value, value.contains(where: { $0 == "\n" || $0 == "\r" }) { throw .lineBreak(field: field) }
        }
        let text = request.text
        do {
            _ = try RequestParser.parse(fileName: "add", bytes: Array(text.utf8))
        } catch {
            throw .invalid(error)
        }
        do throws(StoreError) {
            let layout = try SpoolLayout(root: spool, finalFolder: finalFolder)
            if let fixed {
                let temp = uniqueName()
                try layout.tmp.writeAtomically(temp, Array(text.utf8), sync: true)
                do throws(StoreError) {
                    try layout.tmp.rename(temp, to: fixed, in: layout.incoming, replace: false)
                } catch {
                    layout.tmp.remove(temp)
                    throw error
                }
                try layout.incoming.sync()
                return fixed
            }
            if let group = request.group {
                // Named after its group, placed under the claim lock (see `GroupMarkerNames`).
                let temp = uniqueName()
                try layout.tmp.writeAtomically(temp, Array(text.utf8), sync: true)
                do throws(StoreError) {
                    return try GroupMarkerNames.place(temp, group: group, layout: layout)
                } catch {
                    layout.tmp.remove(temp)
                    throw error
                }
            }
            // The name is unique to this process and second; a taken name (a clock set back, a
            // pid reused within the second) takes the next counter value rather than failing.
            for _ in 0..<100 {
                let name = uniqueName()
                try layout.tmp.writeAtomically(name, Array(text.utf8), sync: true)
                do throws(StoreError) {
                    try layout.tmp.rename(name, to: name, in: layout.incoming, replace: false)
                } catch {
                    layout.tmp.remove(name)
                    if error.errno == EEXIST { continue }
                    throw error
                }
                try layout.incoming.sync()
                return name
            }
            throw StoreError("rename", layout.incoming.path(of: uniqueName()), errno: EEXIST)
        } catch {
            throw .spool(error)
        }
    }

    /// Why `name` cannot name a request file (nil when it can): a plain name, not a dotfile or
    /// `*.tmp`, which the daemon ignores.
    public static func nameProblem(_ name: String) -> String? {
        PlainName.violation(of: name) ?? (name.hasSuffix(".tmp") ? "it ends in .tmp, which the daemon ignores" : nil)
    }

    /// The group marker the request `name` written by `add` will produce.
    public static func groupMarkerPath(of name: String, spool: String, finalFolder: String? = nil) -> String {
        (finalFolder ?? spool + "/final") + "/" + name + ".group.done"
    }

    /// Counts the names this process made, so two `add`s in one second never share one.
    private static let made = Mutex(0)

    /// `add-20261122T091500Z-<pid>-<n>`: readable, sortable by time, unique per host (pid and a
    /// per-process counter within the second).
    public static func uniqueName(at date: Date = Date()) -> String {
        let second = Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
        let stamp = RFC3339.format(second).replacingOccurrences(of: "-", with: "").replacingOccurrences(of: ":", with: "")
        let n = made.withLock { count in
            count += 1
            return count
        }
        return "add-\(stamp)-\(getpid())-\(n)"
    }
}
