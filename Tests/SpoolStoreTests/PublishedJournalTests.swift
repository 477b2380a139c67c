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

    func testAPublishedBatchsEntriesReadAsPublishedUnderTheirFinalNames() throws {
        let name = try publishedBatch()
        XCTAssertEqual(read("staging", name)?.split(separator: "\n").count, 2, "the batch, then its final names")
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

    func testATornSecondLineLeavesTheBatchAsItWasBeforeItsRenames() throws {
        let name = try publishedBatch()
        let whole = try XCTUnwrap(read("staging", name))
        let firstLine = whole.prefix(through: try XCTUnwrap(whole.firstIndex(of: "\n")))
        for cut in [0, 5, (whole.count - firstLine.count) - 2] {
            write("staging", name, String(whole.prefix(firstLine.count + cut)))
            let states = SpoolStore(layout: try SpoolLayout(root: root)).readJournals().states
            XCTAssertEqual(states.count, 3, "cut \(cut)")
            XCTAssertEqual(states["r.1"]?.phase, .ready, "cut \(cut): the first line holds, the torn one is ignored")
            XCTAssertNil(states["r.1"]?.finalName)
        }
    }
}
