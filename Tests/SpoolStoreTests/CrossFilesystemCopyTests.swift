import Crypto
import Foundation
@testable import SpoolStore
import XCTest

/// The copy a final folder on another filesystem gets, and the refusals around it. The copy works
/// within one filesystem too, so these run on any disk; the end-to-end tests cover real tmpfs.
final class CrossFilesystemCopyTests: StoreTestCase {
    private func part(_ bytes: [UInt8]) throws -> StagingFile {
        let part = try store.openPart("r.0", fresh: true)
        XCTAssertEqual(bytes.count, bytes.withUnsafeBytes { Glibc.write(part.fd, $0.baseAddress, $0.count) })
        return part
    }

    private func hex(_ bytes: [UInt8]) -> String { SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() }

    func testACopyMatchingItsMarkerIsWritten() throws {
        let body = (0..<1_300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let copy = CrossFilesystemCopy(part: try part(body), partPath: "p", bytes: Int64(body.count), sha256: hex(body))
        try copy.copy(into: store.layout.done, as: ".x.part.tmp")
        XCTAssertEqual(FileManager.default.contents(atPath: "\(root!)/done/.x.part.tmp").map { [UInt8]($0) }, body)
    }

    func testAPartShorterThanItsMarkerIsRefusedAndNothingIsLeft() throws {
        let body = Array("abc".utf8)
        let copy = CrossFilesystemCopy(part: try part(body), partPath: "p", bytes: 10, sha256: hex(body))
        XCTAssertThrowsError(try copy.copy(into: store.layout.done, as: ".x.part.tmp")) {
            XCTAssertEqual(($0 as? StoreError)?.errno, EIO)
            XCTAssertFalse(($0 as? StoreError)?.isPermanent ?? true)
        }
        XCTAssertEqual(files("done"), [])
    }

    func testACopyWhoseHashDiffersFromItsMarkerIsRefusedAndRemoved() throws {
        let body = Array("the body".utf8)
        let copy = CrossFilesystemCopy(part: try part(body), partPath: "p", bytes: Int64(body.count),
                                       sha256: hex(Array("another body".utf8)))
        XCTAssertThrowsError(try copy.copy(into: store.layout.done, as: ".x.part.tmp")) {
            XCTAssertEqual(($0 as? StoreError)?.call, "verify")
            XCTAssertTrue("\($0)".contains("sha256"), "\($0)")
        }
        XCTAssertEqual(files("done"), [])
    }

    func testAFolderWithoutRenameFlagsOrLinksRefusesToMoveRatherThanOverwrite() throws {
        store.layout.staging.setRenameMethod(.unsupported)
        _ = FileManager.default.createFile(atPath: "\(root!)/staging/a", contents: Data("x".utf8))
        XCTAssertThrowsError(try store.layout.staging.rename("a", to: "a", in: store.layout.done, replace: false)) {
            XCTAssertEqual(($0 as? StoreError)?.errno, EOPNOTSUPP)
            XCTAssertTrue(($0 as? StoreError)?.isPermanent ?? false)
        }
        XCTAssertEqual(files("staging"), ["a"])
        XCTAssertEqual(files("done"), [])
    }
}
