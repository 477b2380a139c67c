import Foundation

/// A publish batch's journal (`SpoolStore.writeJournal`): its descriptor is open only until the
/// batch is published (`closeDescriptor`); afterwards its name is all its owner keeps.
///
/// Its first line is the batch, every entry phase `ready`, written and synced before any rename:
/// what a restart needs to finish the batch. Once the batch is published, lines naming each
/// item's final file follow (`appendPublished`), and those entries read as phase `published`.
/// Why: a consumer takes files and markers away as they arrive; after a crash, a `ready` entry
/// whose file is gone looks like a crash before the rename, and the item would be fetched and
/// delivered to the consumer a second time.
public final class JournalFile: @unchecked Sendable {
    public let name: String
    private(set) var fd: Int32

    init(name: String, fd: Int32) {
        self.name = name
        self.fd = fd
    }

    /// Appends a line naming the final file of each item in `published` (staging base → name).
    /// Never synced, so a line is worth only what it was written after:
    ///
    /// - `durable: false` — right after the data's renames, before the markers are written. It
    ///   carries the boot it was written in and holds only within that boot: a killed process
    ///   loses no system call it made, but a power cut may keep this line and lose the renames
    ///   before it. A restart that believes it finds each file in place (then writes a missing
    ///   marker) or gone (taken by a consumer, which takes a file only once its marker is there).
    ///   It closes, for a crash of the daemon alone, the window from the marker's rename to the
    ///   line after the sync, in which a consumer may take the file, also after the daemon died.
    /// - `durable: true` — after that sync: a line that survives a power cut never names a file
    ///   that did not. It holds for good.
    ///
    /// A line lost or torn leaves the lines before it: the items are then taken for not
    /// published, and delivered again (at least once, never lost).
    @discardableResult
    func appendPublished(_ published: [String: String], durable: Bool) -> Bool {
        guard fd >= 0, !published.isEmpty else { return false }
        let boot: String?
        if durable { boot = nil } else {
            guard let current = BootID.current else { return false }
            boot = current
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return false }
        let line = SpoolJSON.encode(record: PublishedNames(published: published, boot: boot))
        let written = line.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, st.st_size) }
        return written == line.count
    }

    /// Closes the descriptor (the batch no longer needs it); the file stays.
    public func closeDescriptor() {
        if fd >= 0 { close(fd); fd = -1 }
    }

    deinit { closeDescriptor() }
}

/// A batch journal's line after the first: staging base → final name of each item the batch
/// published; `boot` set when the line holds only within that boot (see `appendPublished`).
struct PublishedNames: Codable, SpoolRecord {
    var published: [String: String]
    var boot: String?

    /// Written by hand like the other records: JSONEncoder with sorted keys cost 30,000
    /// instructions for each name, more than the rest of the batch's steps together. The keys
    /// sorted by `String`'s `<` (Unicode scalars; a tenth of the cost of comparing UTF-8 views),
    /// which gives JSONEncoder's order for the names the store tests try, accented ones among
    /// them; a reader takes the names in any order.
    func jsonBytes() -> [UInt8] {
        var w = JSONObjectWriter(capacity: 32 + published.count * 64)
        w.string("boot", boot)
        let sorted = published.sorted { $0.key < $1.key }
        w.object("published", sorted)
        return w.close()
    }

    /// Staging base → final name of each job in the batch journal published so far
    /// (`dataInPlace`: whose data is in the final folder, its marker perhaps not yet). Only jobs
    /// that write a marker: under `markers: group` a consumer waits for the group marker, and by
    /// then the request has ended and its journals are gone, so the lines would protect nothing
    /// (and would only cost a group drain time).
    static func of(_ results: [PublishResult], dataInPlace: Bool = false) -> [String: String] {
        var names: [String: String] = [:]
        for result in results where result.journal != nil && result.job.writesMarker {
            let named = dataInPlace ? result.error == nil && result.finalName != nil : result.isPublished
            guard named, let name = result.finalName else { continue }
            names[SpoolStore.stagingBase(result.job.state.request, index: result.job.state.index)] = name
        }
        return names
    }
}

extension SpoolStore {
    /// A batch journal's entries: its first line, with the entries a later line names as
    /// published (see `JournalFile`). A line that does not parse (torn by a power cut), or one
    /// that holds only within another boot, is passed over.
    public static func decodeJournal(_ bytes: [UInt8], boot: String? = BootID.current) -> [ItemState]? {
        var end = bytes.firstIndex(of: 0x0A).map { $0 + 1 } ?? bytes.count
        guard var states = SpoolJSON.decode([ItemState].self, Array(bytes[..<end])) else { return nil }
        var published: [String: String] = [:]
        while end < bytes.count {
            let next = bytes[end...].firstIndex(of: 0x0A).map { $0 + 1 } ?? bytes.count
            if let line = SpoolJSON.decode(PublishedNames.self, Array(bytes[end..<next])),
               line.boot == nil || line.boot == boot {
                published.merge(line.published) { _, new in new }
            }
            end = next
        }
        guard !published.isEmpty else { return states }
        for i in states.indices {
            guard let name = published[stagingBase(states[i].request, index: states[i].index)] else { continue }
            states[i].phase = .published
            states[i].finalName = name
        }
        return states
    }
}

/// This boot's identity (`/proc/sys/kernel/random/boot_id`), read once; nil when unreadable
/// (then no line that holds only within a boot is written or believed).
public enum BootID {
    public static let current: String? = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return nil }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty ? nil : id
    }()
}
