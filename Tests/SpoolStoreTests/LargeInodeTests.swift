import Foundation
@testable import SpoolStore
import XCTest

/// Inode numbers are unsigned 64-bit. GlusterFS hands out numbers of 2^63 and more (its 128-bit
/// file ids folded into 64 bits), so every record that carries an inode must write and read
/// them back whole: a journal that failed to decode made a restart fetch and publish again what
/// a dead worker had already published.
final class LargeInodeTests: StoreTestCase {
    /// Above 2^63, and with all 64 bits in use.
    private let inodes: [UInt64] = [1 << 63, (1 << 63) + 12_345, UInt64.max - 1, 13]

    private func state(inode: UInt64, phase: ItemState.Phase = .ready) -> ItemState {
        let marker = ItemMarker(request: "r", group: "r", index: 0, url: "http://127.0.0.1/x", finalURL: nil,
                                name: "x.bin", bytes: 1, sha256: String(repeating: "0", count: 64), httpStatus: 200,
                                etag: nil, lastModified: nil, contentType: nil, startedAt: "s", finishedAt: "f",
                                attempts: 1)
        return ItemState(request: "r", index: 0, url: "http://127.0.0.1/x", phase: phase, inode: inode, bytes: 1,
                         attempts: 1, marker: marker)
    }

    func testAPublishJournalReadsBackInodesOfTwoToTheSixtyThirdAndMore() throws {
        let states = inodes.map { state(inode: $0) }
        let bytes = SpoolJSON.encode(states: states)
        XCTAssertFalse(String(decoding: bytes, as: UTF8.self).contains("\"inode\":-"), "never written negative")
        let decoded = try XCTUnwrap(SpoolStore.decodeJournal(bytes), "the journal decodes")
        XCTAssertEqual(decoded.map(\.inode), inodes.map(Optional.some))
    }

    func testAnItemStateFileReadsBackALargeInode() throws {
        for (i, inode) in inodes.enumerated() {
            try store.writeState("big.\(i)", state(inode: inode, phase: .running))
            XCTAssertEqual(store.readState("big.\(i)")?.inode, inode)
        }
    }

    func testAGroupJournalsNameCarriesALargeInodeWhole() {
        for inode in inodes {
            let name = SpoolStore.stagingBase("req") + ".\(inode).group"
            XCTAssertEqual(SpoolStore.journalInode(name), inode)
        }
    }

    func testAPublishedFileIsFoundByALargeInode() throws {
        // The lookup compares the file's own st_ino (UInt64) with the record's: no narrowing.
        write("final", "x.bin", "x")
        let real = try XCTUnwrap(store.layout.final.status(of: "x.bin")).st_ino
        XCTAssertEqual(store.findPublished(name: "x.bin", inode: UInt64(real)), "x.bin")
        XCTAssertNil(store.findPublished(name: "x.bin", inode: UInt64(real) | (1 << 63)))
    }
}
