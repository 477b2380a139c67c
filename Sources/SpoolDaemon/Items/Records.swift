import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore
import SpoolTransfer

/// A claimed request file while its items run. It keeps the file's settings, never its text:
/// an item's full description is re-read from the claimed file when it is needed.
final class RequestRecord {
    /// The request id: its name in this worker's folder.
    let name: String
    /// The claimed file's inode and folder (see `ClaimedRequest`; kept as plain facts, not the
    /// object, to keep a one-item request small).
    let inode: UInt64
    let folder: Directory
    let settings: RequestFileSettings
    /// The daemon's `host:port` table, which its items' `hostID`s index.
    let hosts: HostTable
    var items: [ItemRecord] = []
    /// Names of the publish-batch journals that record items of this request (see `JournalKeeper`).
    var journals: [String] = []
    /// Its items not ended yet, and its group end (the core's `GroupMachine`; its 32-bit count
    /// and the flag packed after it keep a one-item request's record in one 144-byte malloc chunk).
    var groupEnd: GroupMachine
    /// Taken over from a dead worker (its items were recovered from the spool).
    var adopted = false
    /// Its owner, the claimed file's uid at claim (`ClaimedRequest.owner`); after the flags, where
    /// the record's padding was.
    let owner: uid_t

    var group: String { settings.group }
    /// The claim, for the store's calls (`endGroup`, `openFile`).
    var claim: ClaimedRequest { ClaimedRequest(name: name, inode: inode, folder: folder, owner: owner) }
    /// Its owner's name (or uid as text), for markers, status, events and hooks.
    var ownerName: String { SpoolAccounts.userName(owner) }

    /// `openItems`: how many items it has; every item is counted before any is queued or
    /// recovered (a recovered item may end at once, and the group must not end before its later
    /// items are even known).
    init(claim: ClaimedRequest, settings: RequestFileSettings, hosts: HostTable, openItems: Int) {
        name = claim.name
        inode = claim.inode
        folder = claim.folder
        owner = claim.owner
        self.settings = settings
        self.hosts = hosts
        groupEnd = GroupMachine(openItems: openItems)
    }

    /// Re-reads the full description of each of `records` (items of this request) from the
    /// claimed file, opened once and read in file order through one window (a group end reads
    /// every published item's URL: one `pread` each would be a system call per item, all in a
    /// row); nil for an item whose slice cannot be read or no longer matches what was accepted.
    func readItems(_ records: [ItemRecord]) -> [RequestItem?] {
        guard !records.isEmpty, let fd = try? claim.openFile() else { return records.map { _ in nil } }
        defer { close(fd) }
        let reader = RequestItemReader(fd: fd)
        var items = [RequestItem?](repeating: nil, count: records.count)
        for i in records.indices.sorted(by: { records[$0].summary.offset < records[$1].summary.offset }) {
            items[i] = try? records[i].read(with: reader)
        }
        return items
    }
}

/// The `host:port` keys of every item the daemon holds, each stored once: an item keeps only
/// its number. Engine thread only; it never shrinks (hosts are few).
final class HostTable {
    private var keys: [String] = []
    private var ids: [String: UInt32] = [:]

    func id(of key: String) -> UInt32 {
        if let id = ids[key] { return id }
        let id = UInt32(keys.count)
        keys.append(key)
        ids[key] = id
        return id
    }

    subscript(id: UInt32) -> String { keys[Int(id)] }
}

/// One item of a claimed request: what the scheduler needs of it (`ItemSummary`: due time,
/// priority, sizes, host number, and where its lines are in the request file), its lifecycle,
/// and what its transfers left (`ItemTransfer`, created on first use: most of a large batch is
/// waiting, and waiting must stay small). Its URL, name and headers are not kept while it waits:
/// `load()` re-reads them from the claimed file when it starts.
final class ItemRecord {
    let key: Int
    unowned let request: RequestRecord
    /// Its `hostID` numbers the daemon's `HostTable`.
    let summary: ItemSummary
    var lifecycle: ItemLifecycle
    /// Its transfer state (`ItemTransfer`), nil until first used; its fields change only in
    /// ItemTransfer.swift.
    private(set) var transferState: ItemTransfer?

    init(key: Int, request: RequestRecord, summary: ItemSummary, lifecycle: ItemLifecycle) {
        self.key = key
        self.request = request
        self.summary = summary
        self.lifecycle = lifecycle
    }

    /// An adopted item starts where its recovery plan put it: a machine made from that state
    /// (the machine's one way in besides `handle`).
    func recover(_ recovered: ItemLifecycle.Recovered, attempts: Int) {
        lifecycle = ItemLifecycle(recovered: recovered, firstQueued: lifecycle.firstQueued, attempts: attempts)
    }

    /// Staging base name: `staging/BASE.part`, `staging/BASE.state`.
    var base: String { SpoolStore.stagingBase(request.name, index: index) }
    var phase: ItemPhase { lifecycle.phase }
    var attempts: Int { lifecycle.attempts }
    var id: String { "\(request.name)#\(index)" }

    // What is kept while the item waits.
    /// 0-based position in the request file.
    var index: Int { Int(summary.index) }
    /// `host:port` of its URL (of the mirror it asks, once it moved on to one).
    var hostKey: String { transferState?.source.host ?? request.hosts[summary.hostID] }
    var earliestStart: Date? { summary.earliestStart }
    var expectedBytes: Int64? { summary.expectedBytes }
    /// The size the space rules reserve for it: `expected-bytes`, else what a response announced.
    var spaceBytes: Int64? { expectedBytes ?? announcedBytes }
    var priority: Priority { summary.priority }
    var discretionary: Bool { summary.discretionary }

    // The rest, from the request file.

    /// The full description: kept from now until the item ends. Fails when the claimed file can
    /// no longer be read, or its lines differ from when it was accepted (`changed-on-disk`).
    /// `slot`, when given, keeps the claimed file open for the next item's start.
    func load(keepingOpenIn slot: RequestFileSlot? = nil) throws(ItemReadError) -> RequestItem {
        if let item = loaded { return item }
        let item: RequestItem
        if let slot {
            let reader: RequestItemReader
            do throws(StoreError) { reader = try slot.reader(for: request.claim) } catch { throw .store(error) }
            item = try read(with: reader)
        } else {
            let fd: Int32
            do throws(StoreError) { fd = try request.claim.openFile() } catch { throw .store(error) }
            defer { close(fd) }
            item = try read(from: fd)
        }
        noteLoaded(item)
        return item
    }

    /// The full description, loaded or read afresh (not kept); nil when it cannot be read.
    var details: RequestItem? {
        if let item = loaded { return item }
        return request.readItems([self])[0]
    }

    /// The item's URL (empty when the request file can no longer be read).
    var url: String { details?.url.string ?? "" }

    /// Whether its transfer state is allocated (started, recovered, or ended keeping some).
    var holdsTransferState: Bool { transferState != nil }

    /// The item has ended: its transfer state gives way to what its group end still reads (see
    /// `ItemTransfer.remainder`). A list's ended items stay in memory until its last one ends;
    /// keeping each one's whole state (response facts, hash, source) would grow memory with
    /// the list's length. The full description goes too (a group marker reads it again from the
    /// request file, by the item's own host: the mirror it ended on is forgotten).
    func shed() {
        transferState = transferState?.remainder(endedUnchanged: endedUnchanged)
    }

    /// Parses the item's slice of its request file, open as `fd`.
    func read(from fd: Int32) throws(ItemReadError) -> RequestItem {
        do {
            return try RequestParser.item(summary, hostKey: hostKey, settings: request.settings, descriptor: fd)
        } catch {
            throw .request(error)
        }
    }
    /// Parses the item's slice through `reader` (see `RequestItemReader`).
    func read(with reader: RequestItemReader) throws(ItemReadError) -> RequestItem {
        do {
            return try reader.item(summary, hostKey: hostKey, settings: request.settings)
        } catch {
            throw .request(error)
        }
    }
    /// The `If-Range` a resume of this item's part would send (nil: the part cannot be resumed).
    var validator: String? { ResumeValidator.ifRange(etag: etag, lastModified: lastModified) }

    /// The transfer state, allocated on first use (by the steps in ItemTransfer.swift).
    var transfer: ItemTransfer {
        if let t = transferState { return t }
        let t = ItemTransfer()
        transferState = t
        return t
    }

    /// The open part, held by the phase: a running item's, or its publish job's (see
    /// `ItemLifecycle.State`). A waiting item holds none, so open files stay within
    /// `DescriptorBudget` however many items wait.
    var part: StagingFile? { lifecycle.state.part?.file }
    /// What the running phase holds besides its part (`RunningAttempt`).
    var attempt: RunningAttempt? { lifecycle.state.part }
    /// `markers: item` (the default): each published file gets its `NAME.done`.
    var writesItemMarker: Bool { request.settings.markers == .item }
    /// The URL a transfer asks for now: a mirror's once the item moved on to one; else the
    /// refreshed one, else the request's.
    var currentURL: RequestURL? {
        guard let item = loaded else { return nil }
        let source = sourceIndex
        if source > 0, source <= item.mirrors.count { return item.mirrors[source - 1] }
        return refreshedURL ?? item.url
    }
}

/// Why an item's full description could not be read again from its claimed request file.
enum ItemReadError: Error, CustomStringConvertible {
    /// The claimed file could not be opened (or another file took its name).
    case store(StoreError)
    /// The slice could not be read, or it no longer reads as the accepted item.
    case request(RequestReadError)

    /// The errno of the call that failed; nil when the file read but no longer matched.
    var errno: Int32? {
        switch self {
        case .store(let e): e.errno
        case .request(.unreadable(_, let e)): e.errno
        case .request(.rejected): nil
        }
    }

    var description: String {
        switch self {
        case .store(let e): "the request file could not be opened again: \(e)"
        case .request(let e): "the item could not be read again from the request file: \(e)"
        }
    }
}
