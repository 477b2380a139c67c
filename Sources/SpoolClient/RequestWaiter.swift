import Foundation
import SpoolStore

/// `spoolfetch wait` and `add --wait`: blocks until each named request's group has ended, on the
/// spool's own records (the group marker, or the rejection's error file) read by a
/// `SpoolEventReader` that follows them with inotify — no polling, no daemon involved, so it
/// works the same whether the daemon runs now, later, or is a drain started by cron.
public enum RequestWaiter {
    /// How one request ended.
    public struct Ending: Sendable, Equatable {
        public var request: String
        /// `published` (every item published or unchanged), `failed` (any item failed) or
        /// `rejected`.
        public var outcome: String
        /// The group marker; for a rejection, its error file; for a request whose group marker
        /// a consumer already removed, the request file in `done/` or its error file in `failed/`.
        public var path: String
    }

    /// The whole wait's result.
    public enum Result: Sendable, Equatable {
        /// Every request ended; `failed` when any failed or was rejected.
        case ended(failed: Bool)
        /// The deadline passed; these requests were still open.
        case timedOut(open: [String])
    }

    public enum WaitError: Error, CustomStringConvertible {
        case events(EventError)
        /// Nowhere on the spool: not queued, claimed or ended (a typo, or another spool).
        case unknown([String])

        public var description: String {
            switch self {
            case .events(let e): return e.description
            case .unknown(let names):
                return "unknown request \(names.joined(separator: ", ")): not in incoming/, active/, done/, failed/ or rejected/ (names are as add printed them)"
            }
        }
    }

    /// Waits until every request in `requests` has ended or `deadline` passes; `ended` is
    /// called for each ending as it is found.
    ///
    /// A name stands for the newest request of that name (`RequestName.newest`): one queued in
    /// `incoming/` is followed into whatever name its claim gives it (`R~1` when an ended `R`
    /// still holds `R`), so a script that drops the next night's `nightly` and waits for it is
    /// not answered with last night's.
    public static func wait(for requests: [String], spool: String, finalFolder: String? = nil, deadline: Date?,
                            ended: (Ending) -> Void) throws(WaitError) -> Result {
        try wait(for: requests, spool: spool, finalFolder: finalFolder, deadline: deadline, beforeBlocking: {}, ended: ended)
    }

    /// `beforeBlocking` runs each time the wait is about to block for the spool's next change,
    /// its first look done: where a test makes an ending land that only the watch can see.
    ///
    /// **Why no ending is missed.** The watch is set up first, then the names are resolved and
    /// the disk looked at, so whatever ends after the look is announced. And no single
    /// announcement is trusted: the records are read unordered (an ordered reader's cursor
    /// dropped a group marker stamped in the same clock tick as one it had handed out just
    /// before), and a request file arriving in `done/`, `failed/` or `rejected/` — the second
    /// trace every ending leaves — makes the wait look at that request's folders again. Every
    /// look is idempotent: a request ends once, whichever sign comes first.
    static func wait(for requests: [String], spool: String, finalFolder: String?, deadline: Date?,
                     beforeBlocking: () -> Void, ended: (Ending) -> Void) throws(WaitError) -> Result {
        let final = finalFolder ?? spool + "/final"
        let reader: SpoolEventReader
        do throws(EventError) {
            // Endings are taken as soon as they are seen: order does not matter here.
            reader = try SpoolEventReader(spool: spool, finalFolder: finalFolder, kinds: [.groups, .rejections],
                                          follow: true, settle: 0, ordered: false,
                                          wakeFolders: [spool + "/done", spool + "/failed"])
        } catch {
            throw .events(error)
        }
        var open: [String: RequestName.Target] = [:]
        for request in requests { open[request] = RequestName.newest(request, spool: spool, finalFolder: final) }
        var anyFailed = false
        /// Endings of names that a request still being resolved (its claim under way) may turn
        /// out to have: read before its name was known. Only those are kept, not every ending
        /// on the spool.
        var seen: [String: Ending] = [:]
        func end(_ given: String, _ ending: Ending) {
            guard open.removeValue(forKey: given) != nil else { return }
            if ending.outcome != "published" { anyFailed = true }
            ended(ending)
        }
        /// Names resolved (a queued request claimed since), then every ending of a resolved name.
        func settle() {
            for (given, target) in open {
                var target = target
                if target.name == nil, let inode = target.queuedInode {
                    target.name = RequestName.claimed(given, inode: inode, spool: spool)
                    open[given] = target
                }
                guard let name = target.name else { continue }
                if let ending = seen[name] { end(given, ending) }
            }
        }
        func take(_ events: [SpoolEvent]) {
            var byName: [String: [String]] = [:]
            var pending: [String] = []
            for (given, target) in open {
                if let name = target.name { byName[name, default: []].append(given) } else { pending.append(given) }
            }
            for event in events {
                let ending = Ending(request: event.request, outcome: event.event == "rejected" ? "rejected" : event.outcome,
                                    path: event.record)
                for given in byName[event.request] ?? [] { end(given, ending) }
                // `R` or `R~N`: the names a claim of `incoming/R` may give.
                if pending.contains(where: { GroupMarkerNames.followRequest(group: $0, request: event.request) }) {
                    seen[event.request] = ending
                }
            }
            settle()
        }
        /// Where the request files lie: of every open request (`names` nil), or of those whose
        /// file just arrived under one of `names`. Also answers a request whose group marker a
        /// consumer removed: its request file still says how it ended.
        func look(_ names: Set<String>?) {
            var names = names
            func filed() -> [(given: String, ending: Ending)] {
                settle()
                return open.sorted(by: { $0.key < $1.key }).compactMap { given, target in
                    guard let name = target.name, names?.contains(name) ?? true,
                          let ending = endedInFolders(name, spool: spool) else { return nil }
                    return (given, ending)
                }
            }
            guard !filed().isEmpty else { return }
            // The group marker is renamed into place before the request file is filed, so its
            // record is in the watch's queue by now: taken first, such an ending is printed as
            // its marker, as when the record alone had come. Files arriving meanwhile are
            // looked at too.
            while let events = reader.next(until: Date()) {
                if !events.isEmpty { take(events); continue }
                let more = reader.takeWakeups()
                names = more.flatMap { more in names.map { $0.union(more) } }
            }
            for (given, ending) in filed() { end(given, ending) }
        }
        /// What has arrived by now, without blocking.
        func takeArrived() {
            while let events = reader.next(until: Date()) {
                take(events)
                if events.isEmpty || reader.isCaughtUp { look(reader.takeWakeups()) }
            }
        }
        // What is there already (settle 0: all of it at once).
        while !reader.isCaughtUp, let events = reader.next(until: Date()), !events.isEmpty { take(events) }
        _ = reader.takeWakeups()
        look(nil)
        let unknown = open.filter { $0.value.name == nil && $0.value.queuedInode == nil }.map(\.key)
        if !unknown.isEmpty {
            // Its ending may have landed meanwhile: take what arrived, then look a second time
            // (a request moving on between two folders is seen in one of them).
            takeArrived()
            for given in unknown where open[given] != nil {
                open[given] = RequestName.newest(given, spool: spool, finalFolder: final)
            }
            look(nil)
            let still = unknown.filter { open[$0].map { $0.name == nil && $0.queuedInode == nil } ?? false }
            if !still.isEmpty { throw .unknown(still.sorted()) }
        }
        while !open.isEmpty {
            beforeBlocking()
            guard let events = reader.next(until: deadline) else { return .timedOut(open: open.keys.sorted()) }
            take(events)
            // An empty batch: only wake-ups came. Records first, so an ending read from its group
            // marker is printed as the marker, not as the request file filed after it.
            if events.isEmpty || reader.isCaughtUp { look(reader.takeWakeups()) }
        }
        return .ended(failed: anyFailed)
    }

    /// The request's ending from where its file lies, when it has ended.
    static func endedInFolders(_ request: String, spool: String) -> Ending? {
        let fm = FileManager.default
        if fm.fileExists(atPath: "\(spool)/rejected/\(request).error") {
            return Ending(request: request, outcome: "rejected", path: "\(spool)/rejected/\(request).error")
        }
        if fm.fileExists(atPath: "\(spool)/failed/\(request).error") {
            return Ending(request: request, outcome: "failed", path: "\(spool)/failed/\(request).error")
        }
        if fm.fileExists(atPath: "\(spool)/done/\(request)") {
            return Ending(request: request, outcome: "published", path: "\(spool)/done/\(request)")
        }
        return nil
    }
}
