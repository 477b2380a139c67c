import Foundation
import SpoolRequest

/// `spoolfetch retry R` of a request in `failed/`: its failed items go back into the queue as a
/// new request file `R-retry-STAMP`. One code for both who may do it: the client, when it may
/// write `failed/` (root, the daemon's user, or anyone in a spool without `init`), and the daemon,
/// asked through `control/` by a producer that may not (`ControlHandler`).
///
/// The new request is the failed one as its producer wrote it (every file-level key, and each
/// failed item's own lines), so a retry keeps `on-exists`, headers, credentials, markers and the
/// group. `failed/R` and its `.error` stay as the record. Never twice: `failed/R.retried` (a whole
/// request) or `failed/R.retried-INDEX` (one item), created exclusively, names the request that
/// queued them again; an item already queued by either is left out of a later retry, which
/// answers "already queued" when nothing is left.
///
/// Whose the new request is: its file's owner, as for any request — except a retry the daemon's
/// user wrote, which belongs to the failed request's owner (`originalOwner`).
public enum FailedRetry {
    /// Why a failed request was not queued again.
    public enum Failure: Error, Sendable {
        /// Nothing to do, or not allowed: the message says which.
        case refused(String)
        /// A file could not be read or written.
        case io(String)
    }

    /// The request's path in `failed/`, to check its owner before a retry.
    public static func failedPath(_ request: String, in layout: SpoolLayout) -> String {
        layout.root + "/failed/" + request
    }

    /// Why `text` cannot be a retry's deadline (`retry --deadline`: not a deadline, or one that has
    /// passed); nil when it can.
    public static func deadlineProblem(_ text: String, now: Date = Date()) -> String? {
        guard let deadline = RequestDeadline(parsing: text) else {
            return "--deadline must be an RFC 3339 time such as 2026-11-23T06:00:00Z, "
                + "or a time from the claim such as 90m, 6h or 2d; got '\(text)'"
        }
        if case .at(let date) = deadline, date <= now {
            return "--deadline \(text) has passed already: the retried items would fail at once"
        }
        return nil
    }

    /// The indices of a large request's failed items, from the items file its `.error` names in
    /// place of `items` (one JSON object a line, each with its `index`; an item's `cause` has
    /// none), read a line at a time: 200,000 lines are not loaded whole.
    static func listedIndices(atPath path: String) throws(Failure) -> Set<Int> {
        guard let stream = fopen(path, "re") else {
            throw .io("cannot read \(path): \(String(cString: strerror(errno))) (errno \(errno))")
        }
        defer { fclose(stream) }
        var indices = Set<Int>()
        var line: UnsafeMutablePointer<CChar>? = nil
        var capacity = 0
        defer { free(line) }
        let key = Array("\"index\":".utf8)
        while true {
            let length = getline(&line, &capacity, stream)
            guard length > 0, let line else { break }
            let bytes = UnsafeRawBufferPointer(start: line, count: length).bindMemory(to: UInt8.self)
            guard let at = bytes.indices.first(where: { i in
                i + key.count <= bytes.count && zip(key, bytes[i..<i + key.count]).allSatisfy { $0 == $1 }
            }) else { continue }
            var value = 0, i = at + key.count, digits = 0
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { value = value * 10 + Int(bytes[i] - 0x30); i += 1; digits += 1 }
            if digits > 0 { indices.insert(value) }
        }
        return indices
    }

    /// Queues the failed items of `failed/REQUEST` (or only item `index`) again. `id` is the
    /// caller's id, for messages; `deadline` (`retry --deadline`) replaces the items' deadlines.
    public static func retry(request: String, index one: Int?, id: String,
                             layout: SpoolLayout, deadline: String? = nil) throws(Failure) -> ControlResult {
        if let deadline, let problem = deadlineProblem(deadline) { throw .refused(problem) }
        let failedDir = layout.root + "/failed/"
        // The file once, read whole and indexed (each item's byte range, not its parsed fields):
        // a 200,000-item request is retried from its bytes, never split into strings.
        let limits = ParseLimits()
        guard let bytes = try? layout.failed.read(request, limit: limits.maxBytes),
              let errorData = FileManager.default.contents(atPath: failedDir + request + ".error"),
              let record = try? JSONDecoder().decode(ErrorRecord.self, from: errorData) else {
            throw .io("cannot read failed/\(request) and its .error")
        }
        let file: RequestIndex
        do { file = try RequestParser.index(fileName: request, bytes: bytes, limits: limits) } catch { throw .io("\(error)") }
        var indices = Set((record.items ?? []).map(\.index))
        if let listed = record.itemsFile {
            indices.formUnion(try listedIndices(atPath: failedDir + (listed as NSString).lastPathComponent))
        }
        if let one {
            guard indices.contains(one) else { throw .refused("item \(id) did not fail; nothing to retry") }
            indices = [one]
        }
        func earlier(_ note: String) -> String {
            FileManager.default.contents(atPath: note).map { String(decoding: $0, as: UTF8.self) }?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
        }
        func already(_ note: String) -> ControlResult {
            ControlResult(ok: true, message: "\(id) was already queued again as \(earlier(note)); not queued twice",
                          items: [], state: "retried")
        }
        let whole = failedDir + request + ".retried"
        if FileManager.default.fileExists(atPath: whole) { return already(whole) }
        let itemNote = { (index: Int) in failedDir + request + ".retried-\(index)" }
        // The folder listed once: 200,000 failed items were 200,000 lookups.
        let notePrefix = request + ".retried-"
        let queuedBefore = Set(layout.failed.list().compactMap { name in
            name.hasPrefix(notePrefix) ? Int(name.dropFirst(notePrefix.count)) : nil
        }).intersection(indices)
        indices.subtract(queuedBefore)
        guard !indices.isEmpty else {
            if let first = queuedBefore.min() { return already(itemNote(first)) }
            throw .refused("\(request) has no failed item to retry")
        }
        // In file order (the order `retryBytes` writes them).
        let items = file.items.filter { indices.contains(Int($0.index)) }.sorted { $0.offset < $1.offset }
        guard !items.isEmpty else { throw .refused("\(request) has no failed item to retry") }
        let note = one.map(itemNote) ?? whole
        let noteFD = open(note, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if noteFD < 0 {
            guard errno == EEXIST else {
                let e = errno
                throw .io("cannot write \(note): \(String(cString: strerror(e)))")
            }
            return already(note)
        }
        let retried = retryBytes(of: bytes, itemsFrom: Int(file.items.first?.offset ?? Int64(bytes.count)),
                                 kept: items.map { (Int($0.offset), Int($0.length)) }, group: file.group,
                                 request: request, deadline: deadline, now: Date())
        let stamp = RFC3339.format(Date()).filter { $0.isNumber }
        let name = "\(request)-retry-\(stamp)"
        var handed = 0
        do {
            try layout.tmp.writeAtomically(name, retried.bytes, sync: true)
            // The retry stays the failed request's owner's (its owner is its file's): root can
            // give it to them; the daemon's user cannot, and its note says whose it is
            // (`originalOwner`).
            var failedStat = stat()
            if geteuid() == 0, stat(failedDir + request, &failedStat) == 0, failedStat.st_uid != 0 {
                _ = fchownat(layout.tmp.fd, name, failedStat.st_uid, gid_t.max, AT_SYMLINK_NOFOLLOW)
            }
            // Partials a deadline cut short go to the new request's items (in file order, as
            // `retryBytes` writes them), which resume them.
            let staged = Set(layout.staging.list())
            for (newIndex, item) in items.enumerated()
            where staged.contains(KeptParts.keptPartName(of: request, index: Int(item.index))) {
                if try KeptParts.hand(from: request, index: Int(item.index), to: name, index: newIndex, in: layout) { handed += 1 }
            }
            if handed > 0 { try KeptParts.markRequest(name, in: layout) }
            // The note first, then the request: a daemon that claims the request at once finds
            // whose it is.
            let line = Array("incoming/\(name)\n".utf8)
            _ = line.withUnsafeBytes { write(noteFD, $0.baseAddress, $0.count) }
            _ = fsync(noteFD)
            try layout.tmp.rename(name, to: name, in: layout.incoming, replace: false)
            close(noteFD)
        } catch {
            close(noteFD)
            unlink(note)
            layout.tmp.remove(name)
            throw .io("cannot queue the retry: \(error)")
        }
        var message = "queued \(items.count) failed item(s) of \(request) again as incoming/\(name)"
        if handed > 0 { message += "; \(handed) partial(s) a deadline cut short resume where they stopped" }
        if let deadline { message += "; deadline \(deadline)" }
        else if !retried.droppedDeadlines.isEmpty {
            message += "; deadline \(retried.droppedDeadlines.joined(separator: ", ")) had passed and was dropped "
                + "(retry --deadline gives a new one)"
        }
        if !queuedBefore.isEmpty {
            message += "; item(s) \(queuedBefore.sorted().map { "#\($0)" }.joined(separator: ", ")) were already queued again"
        }
        // The ids as a cancel lists them: the first `listedFailuresLimit` (the message counts all).
        return ControlResult(ok: true, message: message,
                             items: items.prefix(SpoolStore.listedFailuresLimit).map { "\(request)#\($0.index)" })
    }

    /// The owner of a claimed request: its file's — unless the file is the daemon user's own (not
    /// root's) and is a retry (`R-retry-STAMP`) whose note in `failed/` (`R.retried`, or
    /// `R.retried-INDEX` for one of the failed items) names it: then the owner of `failed/R`, the
    /// producer's own inode, renamed there and never copied. Both facts are in `failed/`, which
    /// only the daemon's user and root may write after `init`, and a file of the daemon user's in
    /// `incoming/` only it or root can make, so no producer can claim another's ownership this way.
    public static func originalOwner(of name: String, fileOwner: uid_t, daemonUser: uid_t,
                                     in layout: SpoolLayout) -> uid_t {
        // A claim that found the name taken keeps both with a `~N` suffix (`ClaimNames`).
        var name = name
        if let tilde = name.lastIndex(of: "~"), !name[name.index(after: tilde)...].isEmpty,
           name[name.index(after: tilde)...].allSatisfy({ $0.isASCII && $0.isNumber }) {
            name = String(name[..<tilde])
        }
        guard fileOwner == daemonUser, daemonUser != 0, let cut = name.range(of: "-retry-", options: .backwards),
              !name[cut.upperBound...].isEmpty, name[cut.upperBound...].allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return fileOwner
        }
        let request = String(name[..<cut.lowerBound])
        let failed = layout.failed
        let expected = "incoming/\(name)"
        func names(_ note: String) -> Bool {
            guard let bytes = try? failed.read(note) else { return false }
            return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == expected
        }
        var noted = names(request + ".retried")
        if !noted, let data = try? failed.read(request + ".error"),
           let record = try? JSONDecoder().decode(ErrorRecord.self, from: Data(data)) {
            noted = (record.items ?? []).contains { names(request + ".retried-\($0.index)") }
        }
        var st = stat()
        guard noted, fstatat(failed.fd, request, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            return fileOwner
        }
        return st.st_uid
    }

    /// The retry's request file: the failed request's own text before its first item (its
    /// file-level keys, comments included; `itemsFrom` is the first item's offset), then the lines
    /// of each item kept (`kept`: byte ranges in file order, each up to the next item), as written
    /// with CRLF made LF. The group stays the failed request's (`group`, written when the file
    /// named none).
    ///
    /// Deadlines: one counted from the claim (`6h`) is kept, and counts again from the retry's
    /// claim; an RFC 3339 one that has passed by `now` is dropped (kept, it would fail the
    /// retried items at once and their kept partials would never be used), and listed in
    /// `droppedDeadlines`. `deadline` (`retry --deadline`) replaces every `deadline:` line with
    /// one file-level line.
    ///
    /// Bytes, not strings: only a `deadline:` line becomes a `String`; every other line is copied
    /// as it is (200,000 items were 1.7 s of `String`s; this is a copy).
    public static func retryBytes(of bytes: [UInt8], itemsFrom: Int, kept: [(offset: Int, length: Int)], group: String,
                                  request: String, deadline: String? = nil,
                                  now: Date = Date()) -> (bytes: [UInt8], droppedDeadlines: [String]) {
        var out: [UInt8] = []
        out.reserveCapacity(itemsFrom + kept.reduce(0) { $0 + $1.length } + 256)
        func append(_ text: String) { out.append(contentsOf: text.utf8); out.append(0x0A) }
        append("# retry of failed/\(request)")
        let headerEnd = min(max(itemsFrom, 0), bytes.count)
        var namesGroup = false
        RetryLines.each(in: bytes, from: 0, to: headerEnd) { s, e in
            if RetryLines.key(bytes, s, e, is: "group") { namesGroup = true }
        }
        if !namesGroup { append("group: \(group)") }
        if let deadline { append("deadline: \(deadline)") }
        var dropped: [String] = []
        func copy(from start: Int, to end: Int) {
            RetryLines.each(in: bytes, from: start, to: end) { s, e in
                guard RetryLines.key(bytes, s, e, is: "deadline") else {
                    out.append(contentsOf: bytes[s ..< e]); out.append(0x0A); return
                }
                let line = String(decoding: bytes[s ..< e], as: UTF8.self)
                let colon = line.firstIndex(of: ":")!
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                if deadline != nil { append("# \(line.trimmingCharacters(in: .whitespaces)) (replaced by retry --deadline)"); return }
                guard case .at(let date)? = RequestDeadline(parsing: value), date <= now else {
                    out.append(contentsOf: bytes[s ..< e]); out.append(0x0A); return
                }
                if !dropped.contains(value) { dropped.append(value) }
                append("# deadline: \(value) had passed (dropped by retry)")
            }
        }
        copy(from: 0, to: headerEnd)
        for range in kept {
            let start = min(max(range.offset, 0), bytes.count)
            copy(from: start, to: min(start + range.length, bytes.count))
        }
        return (out, dropped)
    }
}

/// The lines of a request file's bytes, for `FailedRetry.retryBytes`: found with `memchr`, and a
/// line's key compared in place.
enum RetryLines {
    /// Calls `body` with each line of `bytes[from..<to]` (its end before the newline and a CR).
    static func each(in bytes: [UInt8], from: Int, to: Int, _ body: (Int, Int) -> Void) {
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            var s = from
            while s < to {
                let found = memchr(base + s, 0x0A, to - s)
                let nl = found.map { UnsafePointer<UInt8>($0.assumingMemoryBound(to: UInt8.self)) - base } ?? to
                var e = nl
                if e > s, buffer[e - 1] == 0x0D { e -= 1 }
                body(s, e)
                s = nl + 1
            }
        }
    }

    /// Whether the line `bytes[s..<e]` is `KEY:` (`key` lowercase ASCII), the key matched without
    /// regard to case and with blanks around it, as the parser reads keys.
    static func key(_ bytes: [UInt8], _ s: Int, _ e: Int, is key: StaticString) -> Bool {
        var i = s
        while i < e, bytes[i] == 0x20 || bytes[i] == 0x09 { i += 1 }
        let count = key.utf8CodeUnitCount
        guard e - i > count else { return false }
        let k = key.utf8Start
        for j in 0 ..< count where bytes[i + j] | 0x20 != k[j] { return false }
        i += count
        while i < e, bytes[i] == 0x20 || bytes[i] == 0x09 { i += 1 }
        return i < e && bytes[i] == 0x3A
    }
}
