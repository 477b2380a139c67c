import Foundation
import Synchronization
@testable import SpoolStore
import XCTest

/// Removing many files at once (`Directory.removeAll`, the batch journals at a group's end) and
/// the few threads it runs on (`FewThreads`, shared with `FileSync`).
final class RemoveAllTests: StoreTestCase {
    func testEveryNameGoesAndOthersStay() throws {
        let names = (0..<40).map { "batch-w-\($0).journal" }
        for name in names { write("staging", name, "{}") }
        write("staging", "keep.part", "bytes")
        store.layout.staging.removeAll(names + ["never-there.journal"])
        XCTAssertEqual(files("staging"), ["keep.part"], "each named file removed, a missing one ignored, the rest kept")
    }

    func testFewerNamesThanTheThreadThresholdGoToo() throws {
        let names = (0..<(Directory.removedAlone - 1)).map { "j\($0)" }
        for name in names { write("staging", name, "x") }
        store.layout.staging.removeAll(names)
        XCTAssertEqual(files("staging"), [])
        store.layout.staging.removeAll([])
    }

    /// Every index exactly once, whatever the width; the caller waits for all of them.
    func testFewThreadsRunsEachIndexOnce() {
        for (count, width) in [(0, 4), (1, 4), (3, 4), (100, 4), (100, 1), (7, 16)] {
            let seen = Mutex<[Int]>(Array(repeating: 0, count: count))
            FewThreads.forEach(count, width: width) { i in seen.withLock { $0[i] += 1 } }
            XCTAssertEqual(seen.withLock { $0 }, Array(repeating: 1, count: count), "count \(count), width \(width)")
        }
    }

    /// The calls overlap: with 4 threads, 4 calls that each wait for the others can all finish
    /// (one after the other they would never meet; the wait is bounded, so a failure cannot hang).
    func testFewThreadsRunsCallsAtOnce() {
        let arrived = Atomic<Int>(0)
        let met = Atomic<Int>(0)
        FewThreads.forEach(4, width: 4) { _ in
            arrived.add(1, ordering: .relaxed)
            let deadline = Date().addingTimeInterval(5)
            while arrived.load(ordering: .relaxed) < 4 && Date() < deadline { sched_yield() }
            if arrived.load(ordering: .relaxed) == 4 { met.add(1, ordering: .relaxed) }
        }
        XCTAssertEqual(met.load(ordering: .relaxed), 4)
    }
}
