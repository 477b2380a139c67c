import Foundation
import SpoolStore
import XCTest

/// A `deadline` or `cancelled` ending's `cause` in the error file, the state file and the group
/// marker: one serialisation, JSONEncoder's bytes with sorted keys, read back whole; absent when
/// an item has none.
final class FailureCauseRecordTests: XCTestCase {
    private static func jsonEncoder<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return [UInt8](try! encoder.encode(value)) + [0x0A]
    }

    func testACauseIsWrittenAsJSONEncoderWritesItWhereverTheItemIsListed() throws {
        let full = FailureCause(code: "host-unreachable", message: "host h:1 unreachable since \"t\"\n", host: "h:1",
                                httpStatus: 503, curlCode: 7, attempts: 2, waitingFor: "pending")
        let bare = FailureCause(code: "paused", message: "", attempts: 0)
        for cause in [full, bare] {
            var failure = ItemFailure(index: 1, url: "http://h/x", name: "x", code: "deadline",
                                      message: "its deadline passed before it ended", attempts: cause.attempts)
            failure.cause = cause
            let error = ErrorRecord(request: "r", code: "items-failed", message: "1 of 1 items failed", items: [failure])
            XCTAssertEqual(SpoolJSON.encode(record: error), Self.jsonEncoder(error))
            XCTAssertEqual(SpoolJSON.decode(ErrorRecord.self, SpoolJSON.encode(record: error)), error)
            let state = ItemState(request: "r", index: 1, url: "u", phase: .failed, attempts: 2, failure: failure)
            XCTAssertEqual(SpoolJSON.encode(record: state), Self.jsonEncoder(state))
            XCTAssertEqual(SpoolJSON.decode(ItemState.self, SpoolJSON.encode(record: state))?.failure?.cause, cause)
            let line = GroupItem(index: 1, url: "http://h/x", outcome: "failed", code: "deadline", message: "m", cause: cause)
            let marker = GroupMarker(group: "g", request: "r", finishedAt: "2026-12-06T07:00:00Z", items: [line])
            XCTAssertEqual(SpoolJSON.encode(groupMarker: marker), Self.jsonEncoder(marker))
            XCTAssertEqual(SpoolJSON.decode(GroupMarker.self, SpoolJSON.encode(groupMarker: marker))?.items.first?.cause, cause)
        }
        let none = GroupItem(index: 0, url: "u", outcome: "failed", code: "http-status", message: "m")
        XCTAssertFalse(String(decoding: SpoolJSON.encode(groupMarker: GroupMarker(group: "g", request: "r", finishedAt: "f", items: [none])),
                              as: UTF8.self).contains("cause"), "no cause: no key")
    }
}
