import Foundation
import Logging
@testable import SpoolDaemon
import SpoolCore
import SpoolStore
import XCTest

/// The group-end room built on its own (issue 60, point 6): a real spool in a temporary folder,
/// the I/O queue held by the test (`HeldIO`), the group hook recorded (`RecordedGroupHooks`), no
/// engine. What it decides: nothing is written until the request's last item has ended; then one
/// job writes the group marker (each item's outcome) and files the request in `failed/` with its
/// counts when any item failed; the written end forgets the request, releases its journals and
/// asks for the group hook with the counts; a failed end is tried again when due, and only then.
final class GroupEndsRoomTests: XCTestCase {
    private var spool: TemporarySpool!
    private var io: HeldIO!
    private var table: ItemTable!
    private var hooks: RecordedGroupHooks!
    private var groupEnds: GroupEnds!

    override func setUpWithError() throws {
        spool = try TemporarySpool("groupends")
        io = HeldIO()
        table = ItemTable()
        hooks = RecordedGroupHooks()
        groupEnds = GroupEnds(store: spool.store, io: io, logger: Logger(label: "groupends-test"),
                              urls: URLPrivacy(keepsQueries: false), table: table,
                              ledger: JournalLedger(staging: spool.layout.staging), requestFile: RequestFileSlot(),
                              hooks: hooks)
    }

    override func tearDown() {
        for call in hooks.calls { spool.store.groupHookDone(call.journal) }
        groupEnds = nil
        spool.remove()
    }

    /// A three-item request, taken in; its items end: published, failed (404), published.
    private func requestWhoseItemsEnd(check: (Int) -> Void = { _ in }) throws -> RequestRecord {
        let request = try spool.claimAndAdd("nightly", """
            https://example.org/a.csv
            https://example.org/b.csv
            https://example.org/c.csv

            """, into: table)
        groupEnds.executor.send(.taken, to: request, now: Date())
        for record in request.items {
            if record.index == 1 {
                record.recover(.failed(ItemFailed(code: "http-404", message: "the server answered 404", attempts: 1,
                                                  facts: ItemFailureFacts(index: 1, url: "https://example.org/b.csv", name: "b.csv",
                                                                          httpStatus: 404))),
                               attempts: 1)
            } else {
                let file = ["a.csv", "", "c.csv"][record.index]
                record.recover(.published(file: file, marker: spool.layout.final.path(of: file + ".done")), attempts: 1)
            }
            groupEnds.executor.send(.itemEnded, to: request, now: Date())
            check(record.index)
        }
        return request
    }

    func testTheLastItemsEndWritesTheGroupMarkerWithItsCountsThenTheHookRuns() throws {
        let request = try requestWhoseItemsEnd { index in
            XCTAssertEqual(self.io.waiting, index < 2 ? 0 : 1, "the end is written after the last item only (item \(index))")
        }
        XCTAssertTrue(spool.names(in: "final").isEmpty, "on the I/O queue, not at once")

        let answers = io.runAll()
        guard answers.count == 1, case .groupEnded(request: "nightly", let markerPath?, let journal?, error: nil) = answers[0] else {
            return XCTFail("\(answers)")
        }
        let marker = try spool.json(markerPath)
        let items = try XCTUnwrap(marker["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["outcome"] as? String }, ["published", "failed", "published"])
        XCTAssertEqual(items.map { $0["url"] as? String },
                       ["https://example.org/a.csv", "https://example.org/b.csv", "https://example.org/c.csv"],
                       "URLs read again from the request file")
        XCTAssertEqual(items[1]["code"] as? String, "http-404")
        XCTAssertEqual(marker["request"] as? String, "nightly")
        XCTAssertTrue(spool.names(in: "failed").contains("nightly"), "one item failed: filed in failed/")
        let error = try spool.json("\(spool.root)/failed/nightly.error")
        XCTAssertEqual(error["code"] as? String, "items-failed")
        XCTAssertEqual(error["message"] as? String, "1 of 3 items failed; the others were published")
        XCTAssertTrue(hooks.calls.isEmpty, "the hook waits for the engine to hear the end was written")

        XCTAssertFalse(groupEnds.ended("nightly", markerPath: markerPath, journal: journal, error: nil, drain: false))
        XCTAssertNil(table.request(named: "nightly"), "forgotten")
        XCTAssertEqual(request.groupEnd.phase, .ended)
        XCTAssertEqual(hooks.calls.count, 1)
        let call = try XCTUnwrap(hooks.calls.first)
        XCTAssertEqual(call.markerPath, markerPath)
        XCTAssertEqual(call.request, "nightly")
        XCTAssertEqual(call.group, "nightly")
        XCTAssertEqual(call.items, 3)
        XCTAssertEqual(call.failed, 1)
    }

    func testAFailedEndIsTriedAgainWhenDueAndNotBefore() throws {
        let request = try requestWhoseItemsEnd()
        XCTAssertEqual(io.waiting, 1)
        io.discardAll()   // the disk answered with an I/O error instead:
        let before = Date()
        XCTAssertFalse(groupEnds.ended("nightly", markerPath: nil, journal: nil,
                                       error: StoreError("rename", spool.root + "/active", errno: EIO), drain: false))
        XCTAssertNotNil(table.request(named: "nightly"), "kept: the end is tried again")
        XCTAssertTrue(hooks.calls.isEmpty)
        let due = try XCTUnwrap(groupEnds.nextRetry)
        XCTAssertGreaterThanOrEqual(due.timeIntervalSince(before), GroupMachine.retryDelay - 0.001)

        groupEnds.retryDue(now: due.addingTimeInterval(-1))
        XCTAssertEqual(io.waiting, 0, "not before it is due")
        groupEnds.retryDue(now: due)
        XCTAssertEqual(io.waiting, 1, "due: written again")
        guard case .groupEnded(_, let markerPath?, let journal?, error: nil) = io.runAll().first else { return XCTFail("not written") }
        XCTAssertFalse(groupEnds.ended("nightly", markerPath: markerPath, journal: journal, error: nil, drain: false))
        XCTAssertEqual(request.groupEnd.phase, .ended)
        XCTAssertEqual(hooks.calls.map(\.failed), [1])
    }

    func testAnEndAnotherWorkerTookOverIsLetGoWithoutAHook() throws {
        _ = try requestWhoseItemsEnd()
        io.discardAll()
        XCTAssertTrue(groupEnds.ended("nightly", markerPath: nil, journal: nil,
                                      error: StoreError("fence", spool.root + "/active"), drain: false),
                      "let go: it is the other worker's")
        XCTAssertNil(table.request(named: "nightly"))
        XCTAssertNil(groupEnds.nextRetry)
        XCTAssertTrue(hooks.calls.isEmpty)
    }
}
