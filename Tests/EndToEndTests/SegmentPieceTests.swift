import Foundation
import NIOCore
import SpoolTestSupport
import XCTest

/// A segmented body handed out in pieces, in order, and hashed as its contiguous prefix grows
/// (`SegmentSet`, `PrefixFollower`): the marker's digest is the published bytes' digest.
final class SegmentPieceTests: SpoolTestCase {
    private let size = 24 << 20

    private func marker(_ name: String) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try spool.read("final", name + ".done"))) as? [String: Any])
    }

    /// More pieces than connections are asked, closed ranges that tile the body, and the
    /// marker's `sha256` is that of the file published, which is the server's body.
    func testPiecesGoInOrderAndTheMarkersDigestIsThePublishedBytes() throws {
        let body = TestBody.random(count: size, seed: 6301)
        // About 6.4 MB/s per connection: long enough for the body to be split.
        server.serve("/pieces.bin", body: body, etag: "\"p1\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(10))])
        try spool.drop("pieces", server.url("/pieces.bin") + "\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        let published = try spool.read("final", "pieces.bin")
        let done = try marker("pieces.bin")
        XCTAssertEqual(done["sha256"] as? String, TestBody.sha256Hex(published), "the marker's digest is the published bytes'")
        XCTAssertEqual(TestBody.sha256Hex(published), TestBody.sha256Hex(body), "byte-identical")
        XCTAssertEqual(done["connections"] as? Int, 6)
        let ranges = server.requests(for: "/pieces.bin").compactMap { $0.header("Range") }.compactMap { range -> [Int]? in
            let spec = range.dropFirst("bytes=".count).split(separator: "-").compactMap { Int($0) }
            return range.hasPrefix("bytes=") && spec.count == 2 ? spec : nil
        }.sorted { $0[0] < $1[0] }
        XCTAssertGreaterThan(ranges.count, 6, "more pieces than connections: \(ranges)")
        // The pieces tile the body after the primary's first one: each begins where the one
        // before it ends (a tail taken over by work stealing begins inside the range it came from).
        let first = try XCTUnwrap(ranges.first)
        var end = first[1]
        for r in ranges.dropFirst() {
            XCTAssertLessThanOrEqual(r[0], end + 1, "a hole before \(r): \(ranges)")
            end = max(end, r[1])
        }
        XCTAssertEqual(end, size - 1, "the last piece ends with the body")
        XCTAssertEqual(spool.leftovers(in: "staging"), [])
    }
}
