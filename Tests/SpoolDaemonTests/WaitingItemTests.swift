import Foundation
import SpoolCore
@testable import SpoolDaemon
import SpoolRequest
import SpoolStore
import XCTest

/// What a waiting item keeps in memory (its summary, no text), and how its full description
/// comes back from the claimed request file when it starts.
final class WaitingItemTests: XCTestCase {
    var root: String!
    var layout: SpoolLayout!
    var store: SpoolStore!

    override func setUpWithError() throws {
        var template = Array((NSTemporaryDirectory() + "/spoolwaiting-XXXXXX").utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        layout = try SpoolLayout(root: root)
        store = SpoolStore(layout: layout, worker: try WorkerFolder(layout: layout))
    }

    override func tearDownWithError() throws {
        store.releaseWorkerFolder()
        store = nil
        layout = nil
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Claims `incoming/name` holding `text` and records it in `table` as the engine does.
    private func claimAndAdd(_ name: String, _ text: String, into table: ItemTable) throws -> RequestRecord {
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(root!)/incoming/\(name)", contents: Data(text.utf8)))
        guard case .claimed(let claim) = try store.claim(name) else { throw XCTSkip("not claimed") }
        let fd = try claim.openFile()
        defer { close(fd) }
        let index = try RequestParser.index(fileName: claim.name, descriptor: fd)
        return table.add(claim: claim, index: index) { _ in ItemLifecycle(firstQueued: Date()) }
    }

    func testWaitingItemsKeepNoTextAndLoadTheirDescriptionFromTheFile() throws {
        var text = "priority: low\nheader: X-Batch: nightly\n"
        for i in 0..<2000 {
            text += "https://mirror\(i % 3).example.org/data/file-\(i).csv\n"
            if i % 2 == 0 { text += "name: even-\(i).csv\nsha256: \(String(repeating: "a", count: 64))\n" }
        }
        let parsed = try RequestParser.parse(fileName: "list", bytes: Array(text.utf8))
        let table = ItemTable()
        let request = try claimAndAdd("list", text, into: table)
        XCTAssertEqual(request.items.count, 2000)
        XCTAssertEqual(Set(request.items.map(\.summary.hostID)).count, 3, "hosts are numbered once for the daemon")

        for record in request.items {
            let item = parsed.items[record.index]
            XCTAssertNil(record.loaded, "a waiting item keeps no URL, name or headers")
            XCTAssertEqual(record.hostKey, item.url.hostKey)
            XCTAssertEqual(record.priority, .low)
            XCTAssertEqual(record.details, item)
        }
        let started = request.items[1234]
        XCTAssertEqual(try started.load(), parsed.items[1234])
        XCTAssertEqual(started.loaded?.headers, [RequestHeader(name: "X-Batch", value: "nightly")])
        XCTAssertTrue(started.holdsTransferState)
        started.shed()   // as when it ends: nothing its group end needs was kept, so all goes
        XCTAssertNil(started.loaded)
        XCTAssertFalse(started.holdsTransferState, "an ended item is as small as a waiting one")
        let grouped = request.items[1235]
        let facts = ItemMarker(request: "list", group: "list", index: 1235, url: "u", finalURL: nil, name: "n",
                               bytes: 1, sha256: "", httpStatus: 200, etag: nil, lastModified: nil,
                               contentType: nil, startedAt: "t", finishedAt: "t", attempts: 1)
        grouped.recover(.published(file: "n", marker: "", receipt: PublishedReceipt(facts)), attempts: 1)
        grouped.shed()
        XCTAssertNotNil(grouped.publishedMarker, "kept for a markers: group marker")

        // A waiting item is small whatever its URL: one object in one 128-byte malloc chunk
        // (120 usable bytes) besides the table's and the scheduler's entries.
        let size = mallocUsableSize(Unmanaged.passUnretained(started).toOpaque())
        print("ItemRecord: \(size) bytes usable; ItemSummary stride \(MemoryLayout<ItemSummary>.stride)")
        XCTAssertLessThanOrEqual(size, 120)
        XCTAssertEqual(MemoryLayout<ItemSummary>.stride, 48)
    }

    /// An ended item keeps only what its group end reads; its full description is read again
    /// from its own lines, also after it moved on to a mirror (whose host its URL does not have).
    /// The machine held by every item, a million of them queued, is as small with the published
    /// phase's receipt: the phase is boxed (`indirect`) with its file, marker and receipt, so the
    /// state stays a word and a tag, and the receipt a pointer in that box.
    func testTheItemMachineIsNoLargerForThePublishedPhasesReceipt() {
        let transfer = ItemTransfer()
        print("ItemLifecycle: size \(MemoryLayout<ItemLifecycle>.size), stride \(MemoryLayout<ItemLifecycle>.stride); "
              + "State: size \(MemoryLayout<ItemLifecycle.State>.size); ItemEvent: size \(MemoryLayout<ItemLifecycle.Event>.size); "
              + "receipt: \(MemoryLayout<PublishedReceipt?>.size) (a marker inline: \(MemoryLayout<ItemMarker?>.size)); "
              + "ItemTransfer: \(mallocUsableSize(Unmanaged.passUnretained(transfer).toOpaque())) bytes usable")
        XCTAssertEqual(MemoryLayout<ItemLifecycle.State>.size, 9)
        XCTAssertEqual(MemoryLayout<ItemLifecycle>.stride, 32)
        XCTAssertEqual(MemoryLayout<PublishedReceipt?>.size, 8)
    }

    func testAnEndedItemThatMovedToAMirrorIsReadAgainFromItsOwnLines() throws {
        let table = ItemTable()
        let request = try claimAndAdd("mirrored", "https://a.example/f\nmirror: https://b.example/f\n", into: table)
        let record = request.items[0]
        _ = try record.load()
        record.noteSource(SourceRotation(count: 2), host: "b.example:443")
        record.noteStateFile()
        XCTAssertEqual(record.hostKey, "b.example:443")
        record.shed()
        XCTAssertTrue(record.hasStateFile, "kept: the group end removes the state file")
        XCTAssertNil(record.loaded)
        XCTAssertEqual(record.hostKey, "a.example:443")
        XCTAssertEqual(request.readItems([record])[0]?.url.string, "https://a.example/f")
    }

    func testAnItemWhoseLinesChangedOnDiskCannotBeLoaded() throws {
        let table = ItemTable()
        let request = try claimAndAdd("r", "https://a.example/one\nhttps://a.example/two\n", into: table)
        // The file is rewritten under the claim: the second item's slice now reads differently.
        let path = request.claim.path
        let fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = "https://a.example/one\nhttps://a.example/tw0\n".withCString { write(fd, $0, 44) }
        close(fd)
        XCTAssertEqual(try request.items[0].load().url.string, "https://a.example/one")
        XCTAssertThrowsError(try request.items[1].load()) { error in
            guard case .request(.rejected(let r)) = error as? ItemReadError else { return XCTFail("\(error)") }
            XCTAssertEqual(r.rule, "changed-on-disk")
        }
        XCTAssertNil(request.items[1].details)
    }

    /// Item starts read their lines through one kept descriptor: the items of one list share
    /// it, another claim's start replaces it, and it goes when its request ends.
    func testItemStartsShareOneKeptDescriptorOfTheirClaimedFile() throws {
        let table = ItemTable()
        let list = try claimAndAdd("list", "https://a.example/1\nhttps://a.example/2\nhttps://b.example/3\n", into: table)
        let single = try claimAndAdd("single", "https://c.example/only\n", into: table)
        func openFiles() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count }
        let before = try openFiles()
        let slot = RequestFileSlot()

        XCTAssertEqual(try list.items[0].load(keepingOpenIn: slot).url.string, "https://a.example/1")
        // Marks the kept descriptor: one opened again would have FD_CLOEXEC set.
        XCTAssertEqual(fcntl(try slot.reader(for: list.claim).fd, F_SETFD, 0), 0)
        XCTAssertEqual(try list.items[1...].map { try $0.load(keepingOpenIn: slot).url.string },
                       ["https://a.example/2", "https://b.example/3"])
        XCTAssertEqual(fcntl(try slot.reader(for: list.claim).fd, F_GETFD), 0, "the later starts read the same descriptor")
        XCTAssertEqual(try openFiles(), before + 1, "one descriptor for the list's three starts")
        XCTAssertEqual(try single.items[0].load(keepingOpenIn: slot).url.string, "https://c.example/only")
        XCTAssertEqual(try openFiles(), before + 1, "the other claim's start replaced it")

        slot.release(list.claim)
        XCTAssertEqual(try openFiles(), before + 1, "the list's end leaves the single request's descriptor")
        slot.release(single.claim)
        XCTAssertEqual(try openFiles(), before, "its request's end closes it")
    }

    func testOneItemRequestIsSmall() throws {
        let table = ItemTable()
        let request = try claimAndAdd("w0000001", "url: https://a.example/f?w1\nname: w0000001.bin\n", into: table)
        let size = mallocUsableSize(Unmanaged.passUnretained(request).toOpaque())
        print("RequestRecord: \(size) bytes usable")
        XCTAssertLessThanOrEqual(size, 136)
        XCTAssertEqual(request.claim.inode, request.inode)
        XCTAssertEqual(try request.claim.readAll(), Array("url: https://a.example/f?w1\nname: w0000001.bin\n".utf8))
    }

    /// A waiting one-item request is kept as one 112-byte slot (no records, no dictionary
    /// entries) and comes back as it was when anything needs it.
    func testAWaitingOneItemRequestSleepsInOneSlotAndWakesAsItWas() throws {
        XCTAssertLessThanOrEqual(MemoryLayout<DormantRequests.Sleeper?>.stride, 112)
        let table = ItemTable()
        let plainText = "url: https://a.example/f?w1\nname: w0000001.bin\nearliest-start: 2030-01-01T02:00:00Z\n"
        // As the engine does: each request is put to sleep right after it is added.
        let plain = try claimAndAdd("w0000001", plainText, into: table)
        table.sleepIfWaiting(plain)
        let plainItem = try XCTUnwrap(plain.items.first?.details)
        let plainKey = plain.items[0].key
        let firstQueued = plain.items[0].lifecycle.firstQueued
        let fancyText = "group: nightly\npriority: high\nheader: X-Batch: nightly\nmarkers: group\nhttps://b.example:8443/x\n"
        let fancy = try claimAndAdd("w0000002", fancyText, into: table)
        table.sleepIfWaiting(fancy)
        let fancyItem = try XCTUnwrap(fancy.items.first?.details)
        let fancyKey = fancy.items[0].key
        let list = try claimAndAdd("list", "https://a.example/1\nhttps://a.example/2\n", into: table)

        table.sleepIfWaiting(list)
        XCTAssertEqual(table.dormant.count, 2, "one-item requests sleep; a list stays awake")
        XCTAssertEqual(table.itemCount, 4)
        XCTAssertEqual(table.items.count, 2)
        XCTAssertNil(table.request(named: "w0000001"))
        XCTAssertNotNil(table.request(named: "list"))

        // A status listing reads a detached copy: the request stays asleep.
        var listed: RequestItem?
        table.withQueuedView(plainKey) { listed = $0.details }
        XCTAssertEqual(listed, plainItem)
        XCTAssertEqual(table.dormant.count, 2)

        // A lookup does not wake it; a start does (`wake` by key), and an operator's command (by
        // name): records as `add` made them.
        XCTAssertNil(table.item(plainKey))
        XCTAssertEqual(table.dormant.count, 2)
        let woken = try XCTUnwrap(table.wake(plainKey))
        XCTAssertEqual(woken.key, plainKey)
        XCTAssertEqual(woken.summary, plain.items[0].summary)
        XCTAssertEqual(woken.lifecycle.firstQueued, firstQueued)
        XCTAssertEqual(woken.phase, .queued)
        XCTAssertEqual(woken.request.name, "w0000001")
        XCTAssertEqual(woken.request.group, "w0000001")
        XCTAssertEqual(woken.request.inode, plain.inode)
        XCTAssertEqual(woken.request.groupEnd.openItems, 1)
        XCTAssertEqual(woken.details, plainItem)
        XCTAssertTrue(table.request(named: "w0000001") === woken.request)
        let fancyWoken = try XCTUnwrap(table.wakeRequest(named: "w0000002"))
        XCTAssertEqual(fancyWoken.group, "nightly")
        XCTAssertEqual(fancyWoken.settings.markers, .group)
        XCTAssertEqual(fancyWoken.items.first?.key, fancyKey)
        XCTAssertEqual(fancyWoken.items.first?.priority, .high)
        XCTAssertEqual(fancyWoken.items.first?.hostKey, "b.example:8443")
        XCTAssertEqual(fancyWoken.items.first?.details, fancyItem)
        XCTAssertEqual(table.dormant.count, 0)
        XCTAssertNil(table.wakeRequest(named: "nothing"))

        // A freed slot is used again under another key: the old key finds nothing.
        let next = try claimAndAdd("w0000003", "https://a.example/3\n", into: table)
        table.sleepIfWaiting(next)
        XCTAssertEqual(table.dormant.count, 1)
        XCTAssertEqual(DormantRequests.slot(of: next.items[0].key), DormantRequests.slot(of: plainKey), "slot 0 again: the emptied table starts over")
        XCTAssertNotEqual(next.items[0].key, plainKey)
        XCTAssertNotEqual(next.items[0].key, fancyKey)
        XCTAssertTrue(table.item(plainKey) === woken, "the woken record answers for its key")

        // An item that has started does not sleep.
        let started = try XCTUnwrap(table.wake(next.items[0].key))
        _ = try started.load()
        table.sleepIfWaiting(started.request)
        XCTAssertEqual(table.dormant.count, 0)
        XCTAssertFalse(table.isEmpty)
    }

    /// A one-item request is put to sleep at the end of the turn that took it in, not at once
    /// (`sleepAtTurnEnd`, `sleepWaiting`): one the scheduler starts in that turn keeps the
    /// records intake made, never put to sleep and woken again; one that still waits sleeps then.
    func testARequestStartedInItsIntakeTurnNeverSleeps() throws {
        let table = ItemTable()
        let policy = RetryPolicy(maxAttempts: 3, resourceTimeout: 3600, backoff: .init(base: 1, cap: 60))
        let context = LifecycleContext(now: Date(), stopping: false, jitter: 0.5)
        let started = try claimAndAdd("w0000001", "https://a.example/1\n", into: table)
        let waiting = try claimAndAdd("w0000002", "https://a.example/2\n", into: table)
        for request in [started, waiting] {
            XCTAssertEqual(request.items[0].lifecycle.handle(.submitted, policy: policy, context: context).map { "\($0)" }, ["schedule"])
            table.sleepAtTurnEnd(request)
        }
        XCTAssertEqual(table.dormant.count, 0, "nothing sleeps before the turn ends")
        // The scheduler starts the first in the same turn: the record is the one intake made.
        let record = try XCTUnwrap(table.wake(started.items[0].key))
        XCTAssertTrue(record === started.items[0])
        XCTAssertEqual(record.lifecycle.handle(.slotGranted(space: .fits), policy: policy, context: context).map { "\($0)" }, ["prepareStart"])
        table.note(record)
        table.sleepWaiting()
        XCTAssertEqual(table.dormant.count, 1)
        XCTAssertNil(table.item(waiting.items[0].key), "the one that only waits sleeps")
        XCTAssertTrue(table.item(started.items[0].key) === record, "the started one stays awake")
        XCTAssertTrue(table.request(named: "w0000001") === started)
        table.sleepWaiting()
        XCTAssertEqual(table.dormant.count, 1, "a turn's list is gone through once")
        XCTAssertEqual(table.itemCount, 2)
    }
}

/// glibc's `malloc_usable_size` (not in the Glibc module map): the bytes an object really takes.
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer) -> Int
