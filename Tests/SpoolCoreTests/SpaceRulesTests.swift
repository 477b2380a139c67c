import Foundation
import SpoolCore
import XCTest

/// The core's disk-space rules, row by row, on figures a shell would read.
final class SpaceRulesTests: XCTestCase {
    let MiB: Int64 = 1 << 20

    func fs(_ path: String, free: Int64?, capacity: Int64?, minFree: Int64) -> FilesystemSpace {
        FilesystemSpace(path: path, filesystem: "tmpfs", free: free, capacity: capacity, minFree: minFree)
    }

    func testNeverOnlyWhenLargerThanTheFilesystemLessMinFree() {
        let small = fs("/s", free: 1 * MiB, capacity: 2 * MiB, minFree: MiB / 2)
        XCTAssertNil(SpaceRules.never(bytes: 3 * MiB / 2, on: small), "exactly what it can ever hold fits some day")
        let why = SpaceRules.never(bytes: 3 * MiB / 2 + 1, on: small)
        XCTAssertEqual(why, "1572865 bytes can never fit on /s (tmpfs): 2097152 bytes in all, 1048576 free now, 524288 kept free (min-free)")
        XCTAssertNil(SpaceRules.never(bytes: 100 * MiB, on: fs("/n", free: nil, capacity: nil, minFree: 0)),
                     "a filesystem that does not say its size never refuses")
        XCTAssertNil(SpaceRules.never(bytes: 0, on: small))
    }

    func testAnswerFitsLaterOrNeverNamingTheFilesystemAndFigures() {
        let staging = fs("/st", free: 10 * MiB, capacity: 100 * MiB, minFree: 2 * MiB)
        let final = fs("/fi", free: 50 * MiB, capacity: 60 * MiB, minFree: 2 * MiB)
        XCTAssertEqual(SpaceRules.answer(needed: 8 * MiB, reserved: 0, on: [staging, final]), .fits)
        XCTAssertEqual(SpaceRules.answer(needed: 4 * MiB, reserved: 4 * MiB + 1, on: [staging, final]),
                       .later(reason: "not enough free space for its expected size: /st (tmpfs): 10485760 bytes free, "
                              + "2097152 kept free, 8388609 needed"))
        guard case .never(let why) = SpaceRules.answer(needed: 59 * MiB, reserved: 0, on: [staging, final]) else {
            return XCTFail("larger than the final folder's filesystem can ever hold")
        }
        XCTAssertTrue(why.contains("/fi"), why)
        XCTAssertEqual(SpaceRules.answer(needed: 1 << 40, reserved: 0, on: [fs("/x", free: nil, capacity: nil, minFree: 0)]),
                       .fits, "unknown figures: the item tries, and a full disk answers")
    }

    func testABodysAnswerIsNeverByItsWholeSizeAndLaterByWhatItStillNeeds() {
        let staging = fs("/st", free: 10 * MiB, capacity: 100 * MiB, minFree: 2 * MiB)
        let final = fs("/fi", free: 50 * MiB, capacity: 60 * MiB, minFree: 2 * MiB)
        XCTAssertEqual(SpaceRules.answer(body: 20 * MiB, needed: 8 * MiB, reserved: 0, on: [staging, final]), .fits,
                       "12 MiB already in the part: only what is still to come must fit now")
        XCTAssertEqual(SpaceRules.answer(body: 20 * MiB, needed: 8 * MiB, reserved: 1, on: [staging, final]),
                       .later(reason: "not enough free space for its 20971520 bytes (from the response's headers): "
                              + "/st (tmpfs): 10485760 bytes free, 2097152 kept free, 8388609 needed"))
        guard case .never(let why) = SpaceRules.answer(body: 59 * MiB, needed: 1, reserved: 0, on: [staging, final]) else {
            return XCTFail("the whole body can never be published on the final folder's filesystem")
        }
        XCTAssertTrue(why.contains("/fi"), why)
        XCTAssertEqual(SpaceRules.answer(body: 1 << 40, needed: 1 << 40, reserved: 0, on: [fs("/x", free: nil, capacity: nil, minFree: 0)]),
                       .fits, "unknown figures: the body comes, and a full disk answers")
    }

    func testPublishNeedsHeadroomAndTheWholeBodyOnlyForACopy() {
        let final = fs("/fi", free: 3 * MiB, capacity: 4 * MiB, minFree: MiB)
        XCTAssertNil(SpaceRules.publishShortage(bytes: 10 * MiB, copies: false, final: final), "a rename needs only headroom")
        XCTAssertNil(SpaceRules.publishShortage(bytes: 2 * MiB - SpaceRules.publishHeadroom, copies: true, final: final))
        let short = SpaceRules.publishShortage(bytes: 2 * MiB - SpaceRules.publishHeadroom + 1, copies: true, final: final)
        XCTAssertEqual(short?.needed, 2 * MiB + 1)
        XCTAssertEqual(short?.folder, "/fi")
        XCTAssertNotNil(SpaceRules.publishShortage(bytes: 0, copies: false, final: fs("/f", free: MiB, capacity: 2 * MiB, minFree: MiB)))
    }

    func testAutomaticMinFreeIs64MiBAtMostAndFivePerCent() {
        XCTAssertEqual(SpaceRules.automaticMinFree(capacity: 64 * MiB), 64 * MiB / 20)
        XCTAssertEqual(SpaceRules.automaticMinFree(capacity: 1 << 40), 64 * MiB)
    }

    /// Arrival order: the first that does not fit keeps the rest waiting; a check is due only
    /// while something waits; waiting twice is waiting once.
    func testQueueReleasesInArrivalOrderAndStopsAtTheFirstThatDoesNotFit() {
        var queue = SpaceQueue<Int>()
        let t0 = Date(timeIntervalSince1970: 1000)
        XCTAssertNil(queue.checkAt)
        queue.wait(1, now: t0)
        queue.wait(2, now: t0.addingTimeInterval(1))
        queue.wait(3, now: t0.addingTimeInterval(1))
        queue.wait(1, now: t0.addingTimeInterval(1))
        XCTAssertEqual(queue.waiting, [1, 2, 3])
        XCTAssertEqual(queue.checkAt, t0.addingTimeInterval(2))
        XCTAssertEqual(queue.release(now: t0.addingTimeInterval(1), fits: { _ in true }), [], "not due yet")
        XCTAssertEqual(queue.release(now: t0.addingTimeInterval(2), fits: { $0 != 2 }), [1])
        XCTAssertEqual(queue.waiting, [2, 3], "3 fits but waits behind 2")
        XCTAssertEqual(queue.checkAt, t0.addingTimeInterval(4))
        queue.leave(2)
        XCTAssertEqual(queue.release(now: t0.addingTimeInterval(4), fits: { _ in true }), [3])
        XCTAssertNil(queue.checkAt, "nothing waits: no timer")
        queue.wait(5, now: t0.addingTimeInterval(5))
        queue.leave(5)
        XCTAssertNil(queue.checkAt)
    }
}
