import Foundation
@testable import SpoolClient
import SpoolStore
import XCTest

/// The event reader over a backlog larger than one batch: every record once, in ctime order, and
/// a reader resumed from any cursor gets exactly the rest. (Against the real daemon's records:
/// EndToEndTests/WaitEventsTests.)
final class SpoolEventReaderTests: XCTestCase {
    func testABacklogComesInOrderOnceAndResumesExactlyAfterAnyCursor() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("spoolfetch-events-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        for folder in ["incoming", "final", "rejected"] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
        let count = SpoolEventReader.batchRecords * 2 + 77
        for i in 0..<count {
            let marker = ItemMarker(request: "r\(i / 10)", group: "g", index: i % 10, url: "http://h/\(i)", finalURL: nil,
                                    name: "f\(i)", bytes: Int64(i), sha256: "", httpStatus: 200, etag: nil, lastModified: nil,
                                    contentType: nil, startedAt: "", finishedAt: "", attempts: 1)
            try Data(SpoolJSON.encode(marker: marker)).write(to: URL(fileURLWithPath: "\(root)/final/f\(i).done"))
        }
        try Data(SpoolJSON.encode(record: ErrorRecord(request: "bad", code: "bad-url", message: "no"))).write(
            to: URL(fileURLWithPath: root + "/rejected/bad.error"))
        try Data("not a marker".utf8).write(to: URL(fileURLWithPath: root + "/final/plain.done"))

        func readAll(since: EventCursor?) throws -> [SpoolEvent] {
            let reader = try SpoolEventReader(spool: root, since: since, settle: 0)
            var all: [SpoolEvent] = []
            while let events = reader.next() { all += events }
            return all
        }
        let all = try readAll(since: nil)
        XCTAssertEqual(all.count, count + 1, "every marker and the rejection, the non-marker skipped")
        XCTAssertEqual(Set(all.map(\.cursor)).count, all.count, "nothing twice")
        let cursors = all.map { EventCursor($0.cursor)! }
        XCTAssertEqual(cursors, cursors.sorted(), "in order")
        for cut in [0, 1, SpoolEventReader.batchRecords - 1, SpoolEventReader.batchRecords, count - 1, count] {
            let rest = try readAll(since: cursors[cut])
            XCTAssertEqual(rest.map(\.cursor), all[(cut + 1)...].map(\.cursor), "resumed after event \(cut)")
        }
        XCTAssertEqual(EventCursor(cursors[5].description), cursors[5], "a cursor reads back as printed")
        XCTAssertNil(EventCursor("12:elsewhere:0:x"))
    }

    /// A group marker is written after its items' markers, often within the same tick of the
    /// kernel's coarse clock (the ctime the order goes by): in one tick, item markers come first,
    /// whatever the names (`a0.group.done` sorts by name before `u0.csv.done`).
    func testAGroupsEndingComesAfterItsItemsWithinOneClockTick() throws {
        XCTAssertLessThan(RecordKey(nanoseconds: 5, folder: 0, name: "u.csv.done"), RecordKey(nanoseconds: 5, folder: 0, name: "a.group.done"))
        XCTAssertLessThan(RecordKey(nanoseconds: 4, folder: 0, name: "a.group.done"), RecordKey(nanoseconds: 5, folder: 0, name: "u.csv.done"))
        XCTAssertLessThan(RecordKey(nanoseconds: 5, folder: 0, name: "a.group.done"), RecordKey(nanoseconds: 5, folder: 1, name: "a.error"))
        XCTAssertLessThan(EventCursor(nanoseconds: 5, folder: 0, name: "u.csv.done", sub: 0),
                          EventCursor(nanoseconds: 5, folder: 0, name: "a.group.done", sub: 0))

        let root = FileManager.default.temporaryDirectory.appendingPathComponent("spoolfetch-events-tick-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        for folder in ["incoming", "final", "rejected"] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
        let pairs = 40
        var sameTick = 0
        for i in 0..<pairs {
            let marker = ItemMarker(request: "a\(i)", group: "a\(i)", index: 0, url: "http://h/u\(i).csv", finalURL: nil,
                                    name: "u\(i).csv", bytes: 1, sha256: "", httpStatus: 200, etag: nil, lastModified: nil,
                                    contentType: nil, startedAt: "", finishedAt: "", attempts: 1)
            try Data(SpoolJSON.encode(marker: marker)).write(to: URL(fileURLWithPath: "\(root)/final/u\(i).csv.done"))
            let group = GroupMarker(group: "a\(i)", request: "a\(i)", finishedAt: "",
                                    items: [GroupItem(index: 0, url: "http://h/u\(i).csv", outcome: "published", file: "u\(i).csv", marker: "u\(i).csv.done")])
            try Data(SpoolJSON.encode(groupMarker: group)).write(to: URL(fileURLWithPath: "\(root)/final/a\(i).group.done"))
            var item = stat(), end = stat()
            XCTAssertEqual(stat("\(root)/final/u\(i).csv.done", &item), 0)
            XCTAssertEqual(stat("\(root)/final/a\(i).group.done", &end), 0)
            if item.st_ctim.tv_sec == end.st_ctim.tv_sec && item.st_ctim.tv_nsec == end.st_ctim.tv_nsec { sameTick += 1 }
        }
        XCTAssertGreaterThan(sameTick, 0, "the premise: some item marker and its group marker share a ctime")
        let reader = try SpoolEventReader(spool: root, since: nil, settle: 0)
        var all: [SpoolEvent] = []
        while let events = reader.next() { all += events }
        XCTAssertEqual(all.count, 2 * pairs)
        for i in 0..<pairs {
            let itemAt = try XCTUnwrap(all.firstIndex { $0.request == "a\(i)" && $0.event == "item" })
            let groupAt = try XCTUnwrap(all.firstIndex { $0.request == "a\(i)" && $0.event == "group" })
            XCTAssertLessThan(itemAt, groupAt, "request a\(i): its item's ending before its group's")
        }
    }
}
