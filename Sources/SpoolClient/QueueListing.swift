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
    /// request by request in name order. Each file is indexed as a stream (the daemon's own
    /// parser) and each listed item re-read from its slice, so memory is one file's index at a
    /// time. Unreadable files are passed over: the daemon that holds them says what is wrong.
    /// `heldHosts`: hosts known to be down (`host:port` → what their items wait for; with no
    /// daemon, the last drain's, see `SpoolOverview.heldHostsFromDrains`), given to their pending items.
    public static func stream(spool: String, skipping: Set<String>, now: Date = Date(), heldHosts: [String: String] = [:],
                              emit: (TaskStatus) -> Void) throws(OperatorError) {
        let store: SpoolStore
        do { store = SpoolStore(layout: try SpoolLayout(root: spool)) } catch { throw .io("\(error)") }
        let journaled = store.readJournals(includingLive: true).states
        let staged = Set(store.layout.staging.list())
        let limits = ParseLimits(maxBytes: Int.max, maxItems: Int.max)   // accepted already, under the daemon's limits
        for (folder, name) in claimedRequests(active: store.layout.active.path) {
            let fd = open(folder + "/" + name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            guard let index = try? RequestParser.index(fileName: name, descriptor: fd, limits: limits) else { continue }
            for summary in index.items {
                let id = "\(name)#\(summary.index)"
                let base = SpoolStore.stagingBase(name, index: Int(summary.index))
                guard !skipping.contains(id), !hasEnded(base, journaled: journaled, staged: staged, store: store),
                      let item = try? RequestParser.item(summary, in: index, descriptor: fd) else { continue }
                var state = "pending"
                var startsAt: String?
                if let start = item.earliestStart, start > now {
                    state = "waiting-start"
                    startsAt = RFC3339.format(start)
                } else if item.discretionary {
                    state = "waiting-window"   // whether the window is open now, only the daemon knows
                }
                var task = TaskStatus(id: id, request: name, group: index.group, name: item.name,
                                      url: displayURL(item.url.string), state: state, bytes: 0,
                                      expected: item.expectedBytes, rate: nil, eta: nil, attempts: 0, error: nil,
                                      startsAt: startsAt, finishedAt: nil)
                if state == "pending", let held = heldHosts[index.hostKey(of: summary)] { task.waitingFor = held }
                emit(task)
            }
        }
    }

    /// Published (in a publish journal, past `running`) or failed for good (`B.state`). The state
    /// file is read only when `staged` (staging/, listed once) has one: most waiting items have none.
    private static func hasEnded(_ base: String, journaled: [String: ItemState], staged: Set<String>,
                                 store: SpoolStore) -> Bool {
        if let state = journaled[base], state.phase != .running { return true }
        return staged.contains(base + ".state") && store.readState(base)?.phase == .failed
    }

    /// The longest id `stream` can list, without reading the files: a request's name, `#`, and
    /// its highest index, which is below its file's size over the shortest item line
    /// (`http://h` and a newline), so a table's id column can be sized before the first row.
    public static func longestID(spool: String) -> Int {
        var longest = 0
        for (folder, name) in claimedRequests(active: spool + "/active") {
            var st = stat()
            let size = lstat(folder + "/" + name, &st) == 0 ? Int(st.st_size) : 0
            longest = max(longest, name.count + 1 + String(max(0, size / 9)).count)
        }
        return longest
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
}

/// Strips the query and fragment from a URL for display (they may hold access tokens).
func displayURL(_ url: String) -> String { URLQuery.stripped(url) }
