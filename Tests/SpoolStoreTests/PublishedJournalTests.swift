import Foundation
import SpoolStore
import XCTest

/// A batch journal's second line (`JournalFile.appendPublished`): once the batch is published,
/// the journal names each item's final file, so that a restart knows the item was published even
/// after a consumer took its file and marker away.
final class PublishedJournalTests: StoreTestCase {
    enum SetUpFailed: Error { case notClaimed }

    /// Publishes `x.bin` (its name already taken, so it becomes `x-1.bin`) and `y.bin` in one
    /// batch of a claimed request, then lets its worker die; returns the journal's name.
    private func publishedBatch() throws -> String {
        write("incoming", "held", "http://127.0.0.1/x\n")
        guard case .claimed = try store.claim("held") else { throw SetUpFailed.notClaimed }
        write("final", "x.bin", "someone else's")
        var x = try job("r.0", name: "x.bin", content: "x")
        var y = try job("r.1", name: "y.bin", content: "y")
        var z = try job("r.2", name: "z.bin", content: "z")
        y.state.index = 1
        z.state.index = 2
        x.writesMarker = true
        let results = Publisher(store: store).publish([x, y, z])
        XCTAssertEqual(results.map(\.finalName), ["x-1.bin", "y.bin", "z.bin"])
        let journal = try XCTUnwrap(results[0].journal)
        store.releaseWorkerFolder()   // the writer died
        return journal.name
    }

    /// The journal's lines: the batch, the names for this boot, the names for good.
    private func lines(_ name: String) throws -> [Substring] {
        try XCTUnwrap(read("staging", name)).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
    }

    func testAPublishedBatchsEntriesReadAsPublishedUnderTheirFinalNames() throws {
        let name = try publishedBatch()
        XCTAssertEqual(try lines(name).count, 3, "the batch, its names for this boot, its names for good")
        let states = SpoolStore(layout: try SpoolLayout(root: root)).readJournals().states
        XCTAssertEqual(states["r.0"]?.phase, .published)
        XCTAssertEqual(states["r.0"]?.finalName, "x-1.bin", "the name it got, not the one it wished for")
        XCTAssertEqual(states["r.1"]?.finalName, "y.bin")
    }

    func testAConsumedFileIsStillKnownAsPublished() throws {
        _ = try publishedBatch()
        for name in ["x-1.bin", "x-1.bin.done", "y.bin", "y.bin.done"] {
            try FileManager.default.removeItem(atPath: "\(root!)/final/\(name)")
        }
        let other = SpoolStore(layout: try SpoolLayout(root: root))
        let states = other.readJournals().states
        XCTAssertEqual(states["r.1"].flatMap(other.publishedFile(of:)), "y.bin", "taken by a consumer, still published")
    }

    func testTheLineWrittenOnceTheDataIsInPlaceHoldsOnlyWithinItsBoot() throws {
        let name = try publishedBatch()
        let all = try lines(name)
        let current = try XCTUnwrap(BootID.current)
        XCTAssertTrue(all[1].contains(current), "the line written once the data is in place names this boot")
        XCTAssertFalse(all[2].contains("boot"), "the line after the markers' sync holds for good")
        let dataInPlace = Array((all[0] + "\n" + all[1] + "\n").utf8)
        XCTAssertEqual(SpoolStore.decodeJournal(dataInPlace, boot: current)?.map(\.phase), [.published, .published, .published],
                       "a killed daemon, the same boot: every call it made stands")
        XCTAssertEqual(SpoolStore.decodeJournal(dataInPlace, boot: "another boot")?.map(\.phase), [.ready, .ready, .ready],
                       "after a power cut the renames before it may be lost")
        let whole = Array(try XCTUnwrap(read("staging", name)).utf8)
        XCTAssertEqual(SpoolStore.decodeJournal(whole, boot: "another boot")?.map(\.phase), [.published, .published, .published],
                       "the line after the sync holds across boots")
    }

    func testATornLineLeavesTheBatchAsItWasBeforeItsRenames() throws {
        let name = try publishedBatch()
        let all = try lines(name)
        let durable = String(all[2])
        for cut in [1, 5, durable.count - 2] {
            write("staging", name, all[0] + "\n" + durable.prefix(cut))
            let states = SpoolStore(layout: try SpoolLayout(root: root)).readJournals().states
            XCTAssertEqual(states.count, 3, "cut \(cut)")
            XCTAssertEqual(states["r.1"]?.phase, .ready, "cut \(cut): the first line holds, the torn one is passed over")
            XCTAssertNil(states["r.1"]?.finalName)
        }
    }

    func testAJobWhoseDataWasRenamedBeforeACrashIsJournaledWithItsMarker() throws {
        write("incoming", "held", "http://127.0.0.1/x\n")
        guard case .claimed = try store.claim("held") else { throw SetUpFailed.notClaimed }
        var j = try job("r.0", name: "w.bin", content: "w")
        write("final", "w.bin", "w")          // its data, renamed before the crash
        j.alreadyPublishedAs = "w.bin"
        let results = Publisher(store: store).publish([j])
        XCTAssertTrue(results[0].isPublished)
        XCTAssertEqual(files("final"), ["w.bin", "w.bin.done"])
        XCTAssertNotNil(results[0].journal, "journaled: a consumer may take file and marker from now on")
        store.releaseWorkerFolder()   // the writer died
        let states = SpoolStore(layout: try SpoolLayout(root: root)).readJournals().states
        XCTAssertEqual(states["r.0"]?.phase, .published)
        XCTAssertEqual(states["r.0"]?.finalName, "w.bin")
    }

    func testABatchWithoutMarkersGetsNoLines() throws {
        write("incoming", "held", "http://127.0.0.1/x\n")
        guard case .claimed = try store.claim("held") else { throw SetUpFailed.notClaimed }
        var j = try job("r.0", name: "g.bin", content: "g")
        j.writesMarker = false      // markers: group: consumers wait for the group marker
        let results = Publisher(store: store).publish([j])
        XCTAssertTrue(results[0].isPublished)
        let journal = try XCTUnwrap(results[0].journal)
        XCTAssertEqual(try lines(journal.name).count, 1, "the batch only")
    }
}
