import Foundation
import SpoolCore
import XCTest

/// `TransferBook` built with fake ports, row by row: what a transfer's end, stop, body start and
/// checkpoint decide (the part's step, the machine's `TransferEnd`, the host's answers, resume
/// states). The simulator runs the same book against simulated servers (Simulation+Transfers.swift).
final class TransferBookTests: XCTestCase {
    /// The fake ports: an item's part as plain fields, and every call written down.
    final class Item {
        var held = PartHeld(validator: "\"v1\"", wantedSHA256: "want", expectedBytes: nil,
                            hasStateFile: false, partNamed: false, partOpen: true)
        var steps: [PartKeep] = []
        var hashes: [String?] = []
        var began: [(etag: String?, restarted: Bool)] = []
    }

    final class Ports: TransferBookPorts {
        typealias Record = Item
        typealias Facts = Int
        typealias Hash = String
        var answers: [(facts: Int, ended: Bool)] = []
        var paced = false
        var never: String? = nil
        var neverAsked: [Int64?] = []
        var announced: [Int64] = []
        var unchangedFile: UnchangedFile? = nil
        var fallThrough = false
        var named = 0
        var states: [(bytes: Int64, synced: Int64)] = []
        var left = 0

        func keep(_ r: Item, _ step: PartKeep, hash: String?) { left += 1; r.steps.append(step); r.hashes.append(hash) }
        func held(_ r: Item) -> PartHeld { r.held }
        func tooLargeHint(_ r: Item) -> String? { " (hint)" }
        func digest(_ hash: String) -> String { "digest(\(hash))" }
        func unchanged(_ r: Item) -> UnchangedFile? { unchangedFile }
        func neverFits(body: Int64?) -> String? { neverAsked.append(body); return never }
        func announce(_ r: Item, bytes: Int64) { announced.append(bytes) }
        func fallsThrough(_ r: Item, _ end: TransferEnd) -> Bool { fallThrough }
        func hostAnswered(_ r: Item, _ facts: Int, ended: Bool) -> Bool { answers.append((facts, ended)); return ended && paced }
        func bodyBegan(_ r: Item, etag: String?, lastModified: String?, restartedFromZero: Bool) { r.began.append((etag, restartedFromZero)) }
        func nameForResume(_ r: Item) -> Bool { named += 1; return true }
        func writeResumeState(_ r: Item, bytes: Int64, synced: Int64) { states.append((bytes, synced)) }
    }

    private func fault(_ status: Int? = nil, code: String = "http-status", diskFull: Bool = false, cancelled: Bool = false,
                       tooLarge: Bool = false) -> TransferFault {
        TransferFault(code: code, description: code, httpStatus: status, diskFull: diskFull, cancelled: cancelled, tooLarge: tooLarge)
    }

    private func running() -> (TransferBook<Ports>, Item) {
        let book = TransferBook(ports: Ports())
        let item = Item()
        book.started(7, item)
        return (book, item)
    }

    private func report(_ fault: TransferFault?, status: Int, bytes: Int64 = 100, etag: String? = nil,
                        rangeTotal: Int64? = nil, contentLength: Int64? = nil) -> TransferReport<Int, String> {
        TransferReport(key: 7, fault: fault, status: status, sha256: fault == nil ? "sha" : nil, bytesInOrder: bytes, hash: "h\(bytes)",
                       etag: etag, rangeTotal: rangeTotal, contentLength: contentLength, facts: status)
    }

    func testAWholeBodyIsPublishedWithItsResponsesValidatorsAndOneHostAnswer() throws {
        let (book, item) = running()
        let (record, end) = try XCTUnwrap(book.ended(report(nil, status: 200, etag: "\"v2\"")))
        XCTAssertTrue(record === item)
        XCTAssertNil(end.fault)
        XCTAssertEqual(end.sha256, "sha")
        XCTAssertEqual(end.wantedSHA256, "want")
        XCTAssertEqual(item.steps, [PartKeep(bytes: 100, etag: "\"v2\"", adoptsValidators: true)])
        XCTAssertEqual(item.hashes, ["h100"])
        XCTAssertEqual(book.ports.answers.map(\.ended), [true])
        XCTAssertEqual(book.ports.left, 1)
        XCTAssertTrue(book.running.isEmpty)
        XCTAssertNil(book.ended(report(nil, status: 200)), "an end of a transfer not running is not the book's")
    }

    func testAnErrorPagesValidatorsNeverBecomeThePartsAndItsBytesStay() throws {
        let (book, item) = running()
        let (_, end) = try XCTUnwrap(book.ended(report(fault(500), status: 500, bytes: 40, etag: "\"page\"")))
        XCTAssertEqual(item.steps, [PartKeep(bytes: 40)])
        XCTAssertEqual(end.fault?.httpStatus, 500)
        XCTAssertTrue(end.hasPartial)
        XCTAssertNil(end.tooLargeHint, "the hint is for a too-large failure only")
    }

    func testA206CutTakesItsValidatorsAndA200WithoutValidatorsKeepsThePartsOwn() throws {
        let (book, item) = running()
        _ = book.ended(report(fault(code: "transfer"), status: 206, bytes: 60, etag: "\"v1\""))
        book.started(7, item)
        _ = book.ended(report(fault(code: "transfer"), status: 200, bytes: 10))
        XCTAssertEqual(item.steps, [PartKeep(bytes: 60, etag: "\"v1\"", adoptsValidators: true), PartKeep(bytes: 10)])
    }

    func testA416IsTheWholePartOnlyWhenItsTotalIsTheBytesHeldAndItIsOfThePartsVersion() throws {
        let (book, item) = running()
        var end = try XCTUnwrap(book.ended(report(fault(416), status: 416, etag: "\"v1\"", rangeTotal: 100))).end
        XCTAssertEqual(end.wholePartialSHA256, "digest(h100)")
        XCTAssertEqual(item.steps.last, PartKeep(bytes: 100), "a 416's validators are not the part's")
        book.started(7, item)
        end = try XCTUnwrap(book.ended(report(fault(416), status: 416, etag: "\"v1\"", rangeTotal: 120))).end
        XCTAssertNil(end.wholePartialSHA256, "another total: the part is not whole")
        book.started(7, item)
        end = try XCTUnwrap(book.ended(report(fault(416), status: 416, etag: "\"v2\"", rangeTotal: 100))).end
        XCTAssertNil(end.wholePartialSHA256, "a server ignoring If-Range sized another version")
        book.started(7, item)
        end = try XCTUnwrap(book.ended(report(fault(416), status: 416, rangeTotal: nil))).end
        XCTAssertNil(end.wholePartialSHA256)
    }

    func testA304EndsTheItemWithTheExistingFileOnlyWhenTheAttemptAskedOnOne() throws {
        let (book, item) = running()
        var end = try XCTUnwrap(book.ended(report(fault(304), status: 304, bytes: 0))).end
        XCTAssertEqual(end.fault?.httpStatus, 304, "not asked conditionally: a failure as any")
        book.ports.unchangedFile = UnchangedFile(file: "f", marker: "f.done")
        book.started(7, item)
        end = try XCTUnwrap(book.ended(report(fault(304), status: 304, bytes: 0))).end
        XCTAssertNil(end.fault)
        XCTAssertEqual(end.notModified, UnchangedFile(file: "f", marker: "f.done"))
        XCTAssertFalse(end.hasPartial)
    }

    func testNoRoomThatCanNeverFitFailsAtOnceAndOneThatFitsLaterWaitsWithItsSize() throws {
        let (book, item) = running()
        var r = report(fault(code: "disk-full", diskFull: true), status: 200, bytes: 0, contentLength: 5000)
        r.noRoom = .never("too large for /spool")
        var end = try XCTUnwrap(book.ended(r)).end
        XCTAssertEqual(end.neverFits, "too large for /spool")
        XCTAssertTrue(book.ports.neverAsked.isEmpty)
        XCTAssertTrue(book.ports.announced.isEmpty)
        r.noRoom = .later
        book.started(7, item)
        end = try XCTUnwrap(book.ended(r)).end
        XCTAssertNil(end.neverFits)
        XCTAssertEqual(book.ports.announced, [5000])
        r.contentLength = nil
        book.started(7, item)
        _ = book.ended(r)
        XCTAssertEqual(book.ports.announced, [5000, TransferBook<Ports>.unsizedStep], "unsized: 1 MiB more than it holds")
    }

    func testAWriteThatHitENOSPCAsksWhetherTheBodyCanEverFit() throws {
        let (book, _) = running()
        book.ports.never = "larger than the filesystem"
        let end = try XCTUnwrap(book.ended(report(fault(code: "write", diskFull: true), status: 206, rangeTotal: 9000, contentLength: 300))).end
        XCTAssertEqual(end.neverFits, "larger than the filesystem")
        XCTAssertEqual(book.ports.neverAsked, [9000], "the whole body's size, not the range's")
    }

    func testOutagesAndTransfersTakenOutAnswerNoHostAndAPacedRefusalCostsNoAttempt() throws {
        let (book, item) = running()
        var r = report(fault(code: "connect"), status: 0, bytes: 0)
        r.outage = true
        XCTAssertFalse(try XCTUnwrap(book.ended(r)).end.pacedRefusal)
        book.started(7, item)
        _ = book.ended(report(fault(code: "cancelled", cancelled: true), status: 0))
        XCTAssertTrue(book.ports.answers.isEmpty)
        book.ports.paced = true
        book.started(7, item)
        XCTAssertTrue(try XCTUnwrap(book.ended(report(fault(429), status: 429))).end.pacedRefusal)
        XCTAssertEqual(book.ports.answers.map(\.facts), [429])
    }

    func testAHashedMirrorsFailureStartsTheNextSourceAndIsNotTheMachines() {
        let (book, item) = running()
        book.ports.fallThrough = true
        XCTAssertNil(book.ended(report(fault(404), status: 404)))
        XCTAssertTrue(book.ports.answers.isEmpty)
        book.started(7, item)
        XCTAssertNil(book.ended(report(nil, status: 200)))
        XCTAssertEqual(book.ports.answers.map(\.ended), [false], "a whole body of another digest: its host answered")
    }

    func testTooLargeGetsItsHint() throws {
        let (book, _) = running()
        XCTAssertEqual(try XCTUnwrap(book.ended(report(fault(code: "too-large", tooLarge: true), status: 200))).end.tooLargeHint, " (hint)")
    }

    func testASegmentedTransfersRangesStayWithAnOpenPartAndBytesPastThePrefixGoOtherwise() {
        let (book, item) = running()
        var r = report(fault(code: "transfer"), status: 206, bytes: 50, etag: "\"v1\"")
        r.keptRanges = [[80, 90, 100]]
        r.partHasMore = true
        book.stopped(item, r)
        XCTAssertEqual(item.steps.last?.ranges, [[80, 90, 100]])
        XCTAssertEqual(item.steps.last?.cutBack, false)
        XCTAssertTrue(book.running.isEmpty)
        r.partOpen = false
        book.started(7, item)
        book.stopped(item, r)
        XCTAssertEqual(item.steps.last, PartKeep(bytes: 50, etag: "\"v1\"", adoptsValidators: true), "no part: nothing kept past the prefix, nothing to cut")
        r.keptRanges = nil
        r.partOpen = true
        book.started(7, item)
        _ = book.ended(r)
        XCTAssertEqual(item.steps.last?.cutBack, true)
    }

    func testALargeBodysStartNamesItsPartAndWritesItsStateASmallOneNeither() {
        let (book, item) = running()
        let large = TransferBook<Ports>.resumeStateThreshold
        book.bodiesBegan([BodyStart(key: 7, etag: "\"v1\"", lastModified: nil, total: large - 1, rangeStart: nil, restartedFromZero: false, facts: 200)],
                         endingWhole: [])
        XCTAssertEqual(book.ports.named, 0)
        XCTAssertTrue(book.ports.states.isEmpty)
        book.bodiesBegan([BodyStart(key: 7, etag: "\"v1\"", lastModified: nil, total: large, rangeStart: 4096, restartedFromZero: false, facts: 206)],
                         endingWhole: [])
        XCTAssertEqual(book.ports.named, 1)
        XCTAssertEqual(book.ports.states.map(\.synced), [4096], "synced up to where the resume's range began")
        book.bodiesBegan([BodyStart(key: 7, etag: "\"v2\"", lastModified: nil, total: nil, rangeStart: nil, restartedFromZero: true, facts: 200)],
                         endingWhole: [])
        XCTAssertEqual(book.ports.states.map(\.synced), [4096, 0], "unknown length: written; started over: nothing synced")
        XCTAssertEqual(item.began.map(\.restarted), [false, false, true])
        item.held.validator = nil
        book.bodiesBegan([BodyStart(key: 7, etag: nil, lastModified: nil, total: large, rangeStart: nil, restartedFromZero: false, facts: 200)],
                         endingWhole: [])
        XCTAssertEqual(book.ports.named, 3, "named, resumable or not")
        XCTAssertEqual(book.ports.states.count, 2, "no state without a validator")
        XCTAssertEqual(book.ports.answers.count, 4)
    }

    func testABodyThatBeganAndEndsWholeInOneTurnAnswersItsHostOnce() {
        let (book, _) = running()
        book.bodiesBegan([BodyStart(key: 7, etag: nil, lastModified: nil, total: 10, rangeStart: nil, restartedFromZero: false, facts: 200)],
                         endingWhole: [7])
        _ = book.ended(report(nil, status: 200))
        XCTAssertEqual(book.ports.answers.map(\.ended), [true])
    }

    func testACheckpointIsWrittenOnlyForABodyWhoseStateWasWrittenWhenItBegan() {
        let (book, item) = running()
        book.checkpointsReached([(key: 7, durableBytes: 1000)])
        XCTAssertTrue(book.ports.states.isEmpty, "no state file yet")
        item.held.hasStateFile = true
        item.held.partNamed = true
        book.checkpointsReached([(key: 7, durableBytes: 1000), (key: 8, durableBytes: 5)])
        XCTAssertEqual(book.ports.states.map(\.bytes), [1000])
        item.held.validator = nil
        book.checkpointsReached([(key: 7, durableBytes: 2000)])
        XCTAssertEqual(book.ports.states.count, 1, "no validator: nothing a resume could build on")
    }
}
