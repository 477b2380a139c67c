import Foundation
import SpoolStore
import XCTest

/// A large request's records: `endings` and `itemsFile` in JSONEncoder's bytes, and the cancel
/// record found only for the claim it was written for.
final class RequestEndingsTests: XCTestCase {
    func testEndingsAndItemsFileAreWrittenAsJSONEncoderWouldWriteThem() {
        let endings = [EndingCount(code: "cancelled", message: "cancelled by the operator", count: 200_000),
                       EndingCount(code: "http-status", message: "HTTP 404", count: 3)]
        var error = ErrorRecord(request: "big", code: "items-failed", message: "200003 of 200003 items failed")
        error.endings = endings
        error.itemsFile = "big.error.items.jsonl"
        error.owner = "alice"
        XCTAssertEqual(SpoolJSON.encode(record: error), SpoolJSONTests.jsonEncoder(error))
        XCTAssertEqual(SpoolJSON.decode(ErrorRecord.self, SpoolJSON.encode(record: error)), error)
        var marker = GroupMarker(group: "big", request: "big", finishedAt: "t",
                                 items: [GroupItem(index: 7, url: "http://h/7", outcome: "published", file: "7")])
        marker.failed = 200_003
        marker.endings = endings
        marker.itemsFile = "big.group.done.items.jsonl"
        XCTAssertEqual(SpoolJSON.encode(record: marker), SpoolJSONTests.jsonEncoder(marker))
        XCTAssertEqual(SpoolJSON.decode(GroupMarker.self, SpoolJSON.encode(record: marker)), marker)
    }

    func testACancelRecordIsFoundForItsClaimOnlyAndRemoved() throws {
        let root = NSTemporaryDirectory() + "ending-tests-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let layout = try SpoolLayout(root: root)
        let store = SpoolStore(layout: layout)
        let claim = ClaimedRequest(name: "big", inode: 42, folder: layout.active, owner: 0)
        XCTAssertNil(store.cancelRecord(of: claim))
        try store.recordCancel(claim, at: Date(timeIntervalSince1970: 0), caller: "root")
        XCTAssertEqual(store.cancelRecord(of: claim)?.caller, "root")
        XCTAssertNil(store.cancelRecord(of: ClaimedRequest(name: "big", inode: 43, folder: layout.active, owner: 0)),
                     "a later request of the same name is another file")
        store.removeCancelRecord(of: claim)
        XCTAssertNil(store.cancelRecord(of: claim))
        XCTAssertEqual(layout.staging.list().filter { $0.hasSuffix(".cancelled") }, [])
    }
}
