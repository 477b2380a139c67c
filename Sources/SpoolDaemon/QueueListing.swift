import Foundation
import SpoolRequest
import SpoolStore

/// Every waiting item on a spool, for `spoolfetch status --all`: read from the spool itself, one
/// request file at a time, so a million waiting items are listed without asking a daemon to
/// serialise its queue and without holding the list in memory.
///
/// The daemon's live report lists only the items that are not just waiting (running, retrying,
/// paused, publishing), the next ones due and those that ended recently. The rest of its queue is
/// what its claimed request files hold, minus the items that have ended, which the spool records:
/// a published item of an open request is in a publish-batch journal (`staging/*.journal`) until
/// its group ends, and a failed one has `staging/B.state` in phase `failed`.
public enum QueueListing {
    /// Calls `emit` for each item of each claimed request (`active/W/R`, and the old layout's
    /// `active/R`) that has not ended and whose id is not in `skipping` (the live reports' items),
    /// request by request in name order. Unreadable files are passed over: the daemon that holds
    /// them says what is wrong with them.
    public static func stream(spool: String, skipping: Set<String>, now: Date = Date(),
                              emit: (TaskStatus) -> Void) {
        let root = URL(fileURLWithPath: spool)
        let active = root.appendingPathComponent("active").path
        let ended = endedItems(staging: root.appendingPathComponent("staging").path)
        for (folder, name) in claimedRequests(active: active) {
            guard let bytes = FileManager.default.contents(atPath: folder + "/" + name),
                  let file = try? RequestParser.parse(fileName: name, bytes: [UInt8](bytes),
                                                      limits: ParseLimits(maxBytes: Int.max, maxItems: Int.max))
            else { continue }
            for item in file.items {
                let id = "\(name)#\(item.index)"
                guard !skipping.contains(id), !ended.contains(SpoolStore.stagingBase(name, index: item.index)) else { continue }
                var state = "pending"
                var startsAt: String?
                if let start = item.earliestStart, start > now {
                    state = "waiting-start"
                    startsAt = RFC3339.format(start)
                } else if item.discretionary {
                    state = "waiting-window"   // whether the window is open now, only the daemon knows
                }
                emit(TaskStatus(id: id, request: name, group: file.group, name: item.name,
                                url: displayURL(item.url.string), state: state, bytes: 0,
                                expected: item.expectedBytes, rate: nil, eta: nil, attempts: 0, error: nil,
                                startsAt: startsAt, finishedAt: nil))
            }
        }
    }

    /// `(folder, name)` of every claimed request file, by name.
    static func claimedRequests(active: String) -> [(String, String)] {
        var found: [(String, String)] = []
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: active)) ?? []
        for entry in entries where !entry.hasPrefix(".") {
            let path = active + "/" + entry
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            if (st.st_mode & S_IFMT) == S_IFREG {
                found.append((active, entry))
            } else if (st.st_mode & S_IFMT) == S_IFDIR {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where !name.hasPrefix(".") {
                    found.append((path, name))
                }
            }
        }
        return found.sorted { $0.1 < $1.1 }
    }

    /// Staging bases of items that have ended: in a publish journal, or with a `failed` state.
    static func endedItems(staging: String) -> Set<String> {
        var ended = Set<String>()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []
        for name in names where !name.hasPrefix(".") {
            if name.hasSuffix(".journal") {
                guard let data = FileManager.default.contents(atPath: staging + "/" + name),
                      let states = SpoolJSON.decode([ItemState].self, [UInt8](data)) else { continue }
                for state in states where state.phase != .running {
                    ended.insert(SpoolStore.stagingBase(state.request, index: state.index))
                }
            } else if name.hasSuffix(".state") {
                guard let data = FileManager.default.contents(atPath: staging + "/" + name),
                      let state = SpoolJSON.decode(ItemState.self, [UInt8](data)), state.phase == .failed else { continue }
                ended.insert(String(name.dropLast(".state".count)))
            }
        }
        return ended
    }
}
