import CLinux
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

    /// `copy_file_range` refuses an output open with `O_APPEND` with EBADF; the copy loop (the
    /// store hit's and this copy's, `FileClone.copyBytes`) goes on by reads and writes then. This
    /// copy's own loop once failed there while the store's went on (issue 60).
    func testTheCopyLoopGoesOnByReadsAndWritesWhereCopyFileRangeSaysEBADF() throws {
        let body = (0..<1_300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let source = try part(body)
        let out = open("\(root!)/done/appended", O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        XCTAssertGreaterThanOrEqual(out, 0)
        defer { close(out) }
        var inOffset: Int64 = 0
        XCTAssertEqual(spoolfetch_copy_file_range(source.fd, &inOffset, out, 1), -1, "the kernel takes O_APPEND now")
        XCTAssertEqual(errno, EBADF)
        let method = try FileClone.copyBytes(from: source.fd, sourcePath: "p", to: out, outPath: "appended",
                                             bytes: Int64(body.count)) { _ in StoreError("read", "p", errno: EIO) }
        XCTAssertEqual(method, .readWrite)
        XCTAssertEqual(FileManager.default.contents(atPath: "\(root!)/done/appended").map { [UInt8]($0) }, body)
        // A store hit's copy without a reflink takes the same way.
        XCTAssertEqual(try FileClone.copy(from: source.fd, sourcePath: "p", to: out, outPath: "appended",
                                          bytes: Int64(body.count), reflink: false), .readWrite)
        XCTAssertEqual(FileManager.default.contents(atPath: "\(root!)/done/appended").map { [UInt8]($0) }, body)
    }

    /// A source that ends before `bytes` is the caller's short-read error, never a shorter copy.
    func testTheCopyLoopRefusesASourceShorterThanAsked() throws {
        let source = try part(Array("abc".utf8))
        let out = open("\(root!)/done/short", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        defer { close(out) }
        XCTAssertThrowsError(try FileClone.copyBytes(from: source.fd, sourcePath: "p", to: out, outPath: "short", bytes: 10) {
            StoreError("read", "p", errno: EIO, detail: "ends at \($0)")
        }) { XCTAssertTrue("\($0)".contains("ends at 3"), "\($0)") }
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
