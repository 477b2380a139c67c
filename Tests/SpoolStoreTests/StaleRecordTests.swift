import Foundation
import SpoolStore
import XCTest

/// Which of an item's records a restart goes by when it has more than one: the record the item
/// was published from (its part is in the final folder), whatever the order they are read in.
final class StaleRecordTests: StoreTestCase {
    enum SetUpFailed: Error { case notClaimed }

    /// A worker killed between its journal and its rename, then a second attempt that published:
    /// two journals name the item (one stale, with a part that is gone).
    /// `staleWith`: changes the stale entry before it is journaled (given the published part's
    /// inode when the stale entry is journaled last, else nil).
    private func staleAndPublished(staleFirst: Bool, staleWith change: (inout ItemState, UInt64?) -> Void = { _, _ in })
        throws -> (stale: PublishJob, published: PublishJob) {
        write("incoming", "held", "http://127.0.0.1/x\n")
        guard case .claimed = try store.claim("held") else { throw SetUpFailed.notClaimed }
        let stale = try job("r.0", name: "x.bin", content: "first try")
        func staleJournal(_ publishedInode: UInt64?) throws {
            var state = stale.state
            change(&state, publishedInode)
            _ = try store.writeJournal([state])
            store.removePart("r.0")
        }
        if staleFirst { try staleJournal(nil) }
        let published = try job("r.0", name: "x.bin", content: "second try")
        XCTAssertNil(Publisher(store: store).publish([published])[0].error)
        if !staleFirst { try staleJournal(published.part.inode) }
        XCTAssertEqual(files("final").filter { $0.hasPrefix("x") }, ["x.bin", "x.bin.done"])
        XCTAssertEqual(files("staging").filter { $0.hasSuffix(".journal") }.count, 2, "two journals name the item")
        store.releaseWorkerFolder()    // the writer died
        return (stale, published)
    }

    func testTheEntryAnItemWasPublishedFromWinsWhenTheStaleOneWasWrittenFirst() throws {
        let (_, published) = try staleAndPublished(staleFirst: true)
        let states = SpoolStore(layout: try SpoolLayout(root: root)).readJournals().states
        XCTAssertEqual(states["r.0"]?.inode, published.part.inode)
    }

    func testTheEntryAnItemWasPublishedFromWinsWhenTheStaleOneWasWrittenLast() throws {
        let (_, published) = try staleAndPublished(staleFirst: false)
        let states = SpoolStore(layout: try SpoolLayout(root: root)).readJournals().states
        XCTAssertEqual(states["r.0"]?.inode, published.part.inode)
    }

    /// The stale record's inode was reused by the part that was published: both records name
    /// the published file. Its own record has its size and the later time, in either order.
    func testWhenAReusedInodeMakesBothRecordsNameTheFileItsOwnRecordWins() throws {
        let (stale, published) = try staleAndPublished(staleFirst: true)
        var reused = stale.state
        reused.inode = published.part.inode
        reused.marker?.finishedAt = "2026-11-26T05:04:00.000Z"
        var own = published.state
        own.marker?.finishedAt = "2026-11-26T05:04:01.000Z"
        XCTAssertEqual(store.publishedFile(of: reused), "x.bin", "the premise: both name the file")
        XCTAssertNotEqual(reused.marker?.bytes, own.marker?.bytes)
        XCTAssertEqual(store.preferringPublished(reused, own).marker?.bytes, own.marker?.bytes)
        XCTAssertEqual(store.preferringPublished(own, reused).marker?.bytes, own.marker?.bytes)

        // The same size (a resource changed in place, or not at all): the later record.
        reused.marker?.bytes = own.marker!.bytes
        reused.marker?.sha256 = "stale"
        XCTAssertEqual(store.preferringPublished(reused, own).marker?.sha256, own.marker?.sha256)
        XCTAssertEqual(store.preferringPublished(own, reused).marker?.sha256, own.marker?.sha256)
    }

    func testReadingTheJournalsGoesByTheFilesOwnRecordWhenAReusedInodeIsInBoth() throws {
        let (_, published) = try staleAndPublished(staleFirst: false) { state, inode in
            state.inode = inode
            state.marker?.finishedAt = "2026-11-26T05:04:00.000Z"
        }
        let states = SpoolStore(layout: try SpoolLayout(root: root)).readJournals().states
        XCTAssertEqual(states["r.0"]?.marker?.bytes, published.marker.bytes, "not the stale entry's size")
    }

    func testPreferringPublishedKeepsThePreferredRecordUnlessOnlyTheOtherWasPublished() throws {
        let (stale, published) = try staleAndPublished(staleFirst: true)
        XCTAssertEqual(store.publishedFile(of: published.state), "x.bin")
        XCTAssertNil(store.publishedFile(of: stale.state), "its part never reached the final folder")
        XCTAssertEqual(store.preferringPublished(stale.state, published.state).inode, published.part.inode)
        XCTAssertEqual(store.preferringPublished(published.state, stale.state).inode, published.part.inode)
        var other = stale.state
        other.inode = 1
        XCTAssertEqual(store.preferringPublished(stale.state, other).inode, stale.part.inode,
                       "neither was published: the preferred one")
        let running = ItemState(request: "r", index: 0, url: "http://x/x.bin", phase: .running, inode: published.part.inode)
        XCTAssertEqual(store.preferringPublished(running, published.state).phase, .ready,
                       "a resume state (no marker) gives way to the journal entry it was published from")
    }
}
