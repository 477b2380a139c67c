import Foundation
import Glibc
import Logging
@testable import SpoolDaemon
import SpoolCore
import SpoolMetrics
import SpoolRequest
@testable import SpoolStore
import Synchronization
import XCTest

/// The publishing room built on its own (issue 60, point 6): a real spool in a temporary folder
/// and the real `Publisher` on it, the I/O queue held by the test (`HeldIO`), no engine. What it
/// decides: a verified part becomes one job, handed over in one batch on the I/O queue; the
/// batch's result becomes the item's event and its journal is tied to the request
/// (`JournalLedger`); a publish that found no room keeps the part named for its retry, and the
/// retry goes only when due.
final class PublishingRoomTests: XCTestCase {
    private var spool: TemporarySpool!
    private var io: HeldIO!
    private var table: ItemTable!

    override func setUpWithError() throws {
        spool = try TemporarySpool("publishing")
        io = HeldIO()
        table = ItemTable()
    }

    override func tearDown() { spool.remove() }

    private func room(publisher: (@Sendable ([PublishJob]) -> [PublishResult])? = nil) -> Publishing {
        let logger = Logger(label: "publishing-test")
        return Publishing(store: spool.store, io: io, logger: logger, urls: URLPrivacy(keepsQueries: false),
                          metrics: DaemonMetrics(worker: "test", version: "0", startedAt: Date()),
                          space: SpaceGate(layout: spool.layout, minFree: nil, logger: logger),
                          ledger: JournalLedger(staging: spool.layout.staging), publisher: publisher)
    }

    /// An item of a claimed request whose body, `bytes`, is complete in its part, as a verified
    /// transfer leaves it.
    /// `unnamed`: the part has no name in staging yet (as a small body's where the filesystem
    /// allows it, see `UnnamedPartSupport`).
    private func verifiedItem(_ bytes: [UInt8], unnamed: Bool = false) throws -> (ItemRecord, StagingFile) {
        let request = try spool.claimAndAdd("req", "https://example.org/data/report.csv\n", into: table)
        return try verified(request.items[0], bytes, unnamed: unnamed)
    }

    private func verified(_ record: ItemRecord, _ bytes: [UInt8], unnamed: Bool = false) throws -> (ItemRecord, StagingFile) {
        _ = try record.load()
        let part = try spool.store.openPart(record.base, fresh: true, unnamed: unnamed)
        try FileIO.writeAll(part.fd, bytes, path: spool.store.partPath(record.base))
        record.partRecoveredWhole(bytes: Int64(bytes.count))
        return (record, part)
    }

    private static let digest = String(repeating: "ab", count: 32)

    func testAVerifiedPartIsPublishedInOneBatchJournalThenDataThenMarker() throws {
        let publishing = room()
        let body = Array("id,value\n1,2\n".utf8)
        let (record, part) = try verifiedItem(body)
        let job = try XCTUnwrap(publishing.publish(record, digest: Self.digest, part: part))
        XCTAssertEqual(job.marker.sha256, Self.digest)
        XCTAssertEqual(job.marker.bytes, Int64(body.count))
        XCTAssertEqual(job.marker.url, "https://example.org/data/report.csv")
        XCTAssertEqual(job.marker.index, 0)
        XCTAssertEqual(io.waiting, 0, "queued, not handed over until kicked")
        XCTAssertEqual(publishing.handOverAt, .distantPast, "due at once")

        publishing.kick(now: Date())
        XCTAssertTrue(publishing.inFlight)
        XCTAssertEqual(io.waiting, 1, "one batch on the I/O queue")

        let watch = try NameWatch([spool.layout.staging.path, spool.layout.final.path])
        let answers = io.runAll()
        guard answers.count == 1, case .published(let results) = answers[0] else { return XCTFail("\(answers)") }
        let events = publishing.batchEnded(results, item: { $0 == record.base ? record : nil })
        XCTAssertFalse(publishing.inFlight)
        XCTAssertTrue(publishing.isIdle)
        guard events.count == 1, events[0].0 === record, case .publishSucceeded(let file, let marker, _) = events[0].1 else {
            return XCTFail("\(events)")
        }
        XCTAssertEqual(file, "report.csv")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: spool.layout.final.path(of: file))), Data(body))
        let written = try spool.json(marker)
        XCTAssertEqual(written["sha256"] as? String, Self.digest)
        XCTAssertEqual(written["bytes"] as? Int, body.count)
        XCTAssertFalse(spool.store.partExists(record.base), "the part went into the final folder")

        // The order names appeared in: the journal (staging), then the data, then its marker (final).
        let order = watch.names()
        print("names as they appeared: \(order)")
        let journal = order.firstIndex { $0.hasSuffix(".journal") }
        let data = order.firstIndex(of: file)
        let markerAt = order.firstIndex(of: (marker as NSString).lastPathComponent)
        XCTAssertNotNil(journal, "\(order)")
        XCTAssertLessThan(try XCTUnwrap(journal), try XCTUnwrap(data), "journal before data: \(order)")
        XCTAssertLessThan(try XCTUnwrap(data), try XCTUnwrap(markerAt), "data before its marker: \(order)")

        // The batch's journal is tied to the request until its group ends (`JournalLedger`).
        XCTAssertEqual(record.request.journals.count, 1)
        let journalName = try XCTUnwrap(record.request.journals.first)
        XCTAssertTrue(spool.names(in: "staging").contains(journalName))
    }

    func testAPublishThatFoundNoRoomKeepsItsPartNamedAndIsRetriedWhenDue() throws {
        // The first batch meets a full disk; the next runs the real publisher.
        let store = spool.store
        let calls = Atomic<Int>(0)
        let publishing = room(publisher: { jobs in
            if calls.add(1, ordering: .relaxed).oldValue == 0 {
                return jobs.map { PublishResult(job: $0, base: $0.part.base,
                                                error: StoreError("fdatasync", store.partPath($0.part.base), errno: ENOSPC)) }
            }
            return Publisher(store: store).publish(jobs)
        })
        let body = Array(repeating: UInt8(ascii: "x"), count: 4096)
        let (record, part) = try verifiedItem(body, unnamed: true)
        XCTAssertFalse(part.isNamed, "the temporary folder's filesystem takes O_TMPFILE")
        XCTAssertFalse(spool.store.partExists(record.base))
        _ = try XCTUnwrap(publishing.publish(record, digest: Self.digest, part: part))
        publishing.kick(now: Date())
        guard case .published(let full) = io.runAll().first else { return XCTFail("no batch") }
        let failed = publishing.batchEnded(full, item: { $0 == record.base ? record : nil })
        guard failed.count == 1, case .publishFailed(let fault, let kept) = failed[0].1, let job = kept else {
            return XCTFail("\(failed)")
        }
        XCTAssertTrue(fault.diskFull)
        XCTAssertFalse(fault.neverFits, "4 KiB fits the filesystem once space is freed")
        XCTAssertFalse(fault.permanent)
        XCTAssertFalse(fault.partGone)
        XCTAssertNil(job.alreadyPublishedAs, "nothing went through")
        XCTAssertTrue(spool.store.partExists(record.base), "the part waits, named, in staging")
        XCTAssertTrue(publishing.isIdle, "the room keeps nothing until the item asks for a retry")

        let now = Date()
        publishing.retry(job, at: now.addingTimeInterval(30))
        XCTAssertFalse(publishing.isIdle)
        XCTAssertEqual(publishing.handOverAt, now.addingTimeInterval(30))
        publishing.kick(now: now.addingTimeInterval(29))
        XCTAssertEqual(io.waiting, 0, "not before it is due")
        publishing.kick(now: now.addingTimeInterval(30))
        XCTAssertEqual(io.waiting, 1, "due: handed over")
        guard case .published(let results) = io.runAll().first else { return XCTFail("no retry batch") }
        let events = publishing.batchEnded(results, item: { $0 == record.base ? record : nil })
        guard events.count == 1, case .publishSucceeded(let file, _, _) = events[0].1 else { return XCTFail("\(events)") }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: spool.layout.final.path(of: file))), Data(body))
        XCTAssertEqual(calls.load(ordering: .relaxed), 2)
        XCTAssertTrue(publishing.isIdle)
    }

    func testOneBatchAtATimeAndTheNextCollectsWhatFinishedMeanwhile() throws {
        let publishing = room()
        let request = try spool.claimAndAdd("pair", "https://example.org/one.txt\nhttps://example.org/two.txt\n", into: table)
        let (first, firstPart) = try verified(request.items[0], Array("1\n".utf8))
        let (second, secondPart) = try verified(request.items[1], Array("2\n".utf8))
        let item: (String) -> ItemRecord? = { [first, second] base in [first, second].first { $0.base == base } }
        _ = try XCTUnwrap(publishing.publish(first, digest: Self.digest, part: firstPart))
        publishing.kick(now: Date())
        XCTAssertEqual(io.waiting, 1)
        _ = try XCTUnwrap(publishing.publish(second, digest: Self.digest, part: secondPart))
        XCTAssertNil(publishing.handOverAt, "a batch in flight: the next waits for its result")
        publishing.kick(now: Date())
        XCTAssertEqual(io.waiting, 1, "a batch in flight: nothing more handed over")
        guard case .published(let one) = io.runAll().first else { return XCTFail("no batch") }
        XCTAssertEqual(one.map(\.base), [first.base])
        XCTAssertEqual(publishing.batchEnded(one, item: item).count, 1)
        XCTAssertEqual(publishing.handOverAt, .distantPast, "the waiting job is due now")
        publishing.kick(now: Date())
        guard case .published(let two) = io.runAll().first else { return XCTFail("no second batch") }
        XCTAssertEqual(two.map(\.base), [second.base])
        XCTAssertEqual(publishing.batchEnded(two, item: item).map { if case .publishSucceeded = $0.1 { true } else { false } }, [true])
        XCTAssertEqual(spool.names(in: "final").filter { !$0.hasSuffix(".done") }.sorted(), ["one.txt", "two.txt"])
        XCTAssertTrue(publishing.isIdle)
    }

    func testAWithdrawnJobIsNotHandedOver() throws {
        let publishing = room()
        let (record, part) = try verifiedItem(Array("a\n".utf8))
        _ = try XCTUnwrap(publishing.publish(record, digest: Self.digest, part: part))
        XCTAssertTrue(publishing.withdraw(base: record.base), "no batch had it yet")
        publishing.kick(now: Date())
        XCTAssertEqual(io.waiting, 0)
        XCTAssertTrue(publishing.isIdle)
    }
}

/// The names created in or moved into some folders, in the order they appeared: one inotify
/// instance watches them all, so its queue orders events across the folders. Read after the
/// fact (non-blocking): the events wait in the queue.
private final class NameWatch {
    private let fd: Int32

    init(_ folders: [String]) throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw StoreError("inotify_init1", "") }
        for folder in folders where inotify_add_watch(fd, folder, UInt32(IN_CREATE | IN_MOVED_TO)) < 0 {
            throw StoreError("inotify_add_watch", folder)
        }
    }

    deinit { close(fd) }

    func names() -> [String] {
        var found: [String] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= n {
                let length = buffer.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)) }
                let nameBytes = buffer[(offset + header)..<(offset + header + length)].prefix { $0 != 0 }
                found.append(String(decoding: nameBytes, as: UTF8.self))
                offset += header + length
            }
        }
        return found
    }
}
