import Foundation
import SpoolStore
import SpoolTestSupport
import XCTest

/// A worker killed between a batch's journal and its renames leaves an item's part complete in
/// `staging/` and its entry (phase ready, with the marker's size and SHA-256) in the journal. The
/// next run publishes that part without fetching it again — only when the part's bytes are the
/// ones the entry vouches for. Its inode is not proof enough: a freed inode goes to the next file
/// at once, so the part of a later attempt can carry the number of the entry's part.
final class PartRecoveryTests: SpoolTestCase {
    enum SetUpFailed: Error { case notClaimed }

    /// Leaves the spool as that dead worker would: `held` claimed in its folder, item 0's part
    /// holding `part`, and a journal entry whose marker describes `journaled`.
    private func deadWorkerWithAJournaledPart(part: [UInt8], journaled: [UInt8]) throws {
        try spool.drop("held", server.url("/f") + "\nname: f.bin\n")
        let store = SpoolStore(layout: try SpoolLayout(root: spool.root))
        guard case .claimed = try store.claim("held") else { throw SetUpFailed.notClaimed }
        let staged = try store.openPart(SpoolStore.stagingBase("held", index: 0), fresh: true)
        XCTAssertEqual(part.withUnsafeBytes { write(staged.fd, $0.baseAddress!, $0.count) }, part.count)
        let marker = ItemMarker(request: "held", group: "held", index: 0, url: server.url("/f"), finalURL: server.url("/f"),
                                name: "f.bin", bytes: Int64(journaled.count), sha256: TestBody.sha256Hex(journaled),
                                httpStatus: 200, etag: nil, lastModified: nil, contentType: nil,
                                startedAt: "2026-11-26T05:00:00.000Z", finishedAt: "2026-11-26T05:00:01.000Z", attempts: 1)
        _ = try store.writeJournal([ItemState(request: "held", index: 0, url: marker.url, phase: .ready,
                                              inode: staged.inode, attempts: 1, marker: marker)])
        store.releaseWorkerFolder()    // the worker died
    }

    func testAJournaledPartWithTheMarkersDigestIsPublishedWithoutFetchingIt() throws {
        let body = TestBody.random(count: 300_000, seed: 50)
        server.serve("/f", body: body)
        try deadWorkerWithAJournaledPart(part: body, journaled: body)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "f.bin")), TestBody.sha256Hex(body))
        XCTAssertEqual(server.requests(for: "/f").count, 0, "published from the part")
    }

    func testAPartOfTheMarkersSizeButAnotherDigestIsFetchedAgain() throws {
        let journaled = TestBody.random(count: 300_000, seed: 51)
        let current = TestBody.random(count: 300_000, seed: 52)    // changed in place, same size
        server.serve("/f", body: current)
        try deadWorkerWithAJournaledPart(part: current, journaled: journaled)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/f").count, 1, "the part is not the entry's: fetched again")
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "f.bin")), TestBody.sha256Hex(current))
        let marker = try json("final", "f.bin.done")
        XCTAssertEqual(marker["sha256"] as? String, TestBody.sha256Hex(current), "the marker describes the file")
        XCTAssertEqual(spool.files(in: "final").sorted(), ["f.bin", "f.bin.done", "held.group.done"], "published once")
    }
}
