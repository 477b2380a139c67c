import Foundation
import SpoolStore
import XCTest

/// Bytes left for the publisher to write (`StagingFile.unwritten`): written before the batch
/// journals, syncs or moves the part, and a job whose bytes cannot be written stays out of the
/// batch, keeping them, while the rest of the batch goes through.
final class UnwrittenBytesTests: StoreTestCase {
    private final class Bytes: UnwrittenPartBytes, @unchecked Sendable {
        let offset: Int64
        let bytes: [UInt8]
        init(_ text: String, at offset: Int64) { self.offset = offset; bytes = Array(text.utf8) }
    }

    /// A job whose part holds `head` in its file and `tail` unwritten, at `offset`.
    private func jobWithTail(_ base: String, name: String, head: String, tail: String, at offset: Int64? = nil,
                             unnamed: Bool = true) throws -> PublishJob {
        var job = try job(base, name: name, content: head, unnamed: unnamed)
        job.part.unwritten = Bytes(tail, at: offset ?? Int64(head.utf8.count))
        job.marker.bytes = Int64((head + tail).utf8.count)
        job.state.marker = job.marker
        return job
    }

    func testUnwrittenBytesArePublishedWithTheFile() throws {
        let jobs = try (0..<4).map { try jobWithTail("r.\($0)", name: "w\($0).bin", head: $0 % 2 == 0 ? "" : "head \($0) ",
                                                    tail: "tail \($0)", unnamed: $0 < 3) }
        let results = Publisher(store: store).publish(jobs)
        XCTAssertEqual(results.compactMap(\.error).count, 0)
        XCTAssertTrue(results.allSatisfy(\.isPublished))
        XCTAssertEqual(read("final", "w0.bin"), "tail 0")
        XCTAssertEqual(read("final", "w1.bin"), "head 1 tail 1")
        XCTAssertEqual(read("final", "w3.bin"), "head 3 tail 3", "a named part too")
        XCTAssertTrue(jobs.allSatisfy { $0.part.unwritten == nil }, "written once, then dropped")
    }

    func testAJobWhoseBytesCannotBeWrittenStaysOutOfTheBatchAndKeepsThem() throws {
        // pwrite at a negative offset fails (EINVAL), as a full disk would fail it (ENOSPC).
        let jobs = try (0..<3).map { try jobWithTail("r.\($0)", name: "v\($0).bin", head: "", tail: "body \($0)",
                                                    at: $0 == 1 ? -1 : 0) }
        let results = Publisher(store: store).publish(jobs)
        XCTAssertNil(results[0].error)
        XCTAssertNil(results[2].error)
        let error = try XCTUnwrap(results[1].error)
        XCTAssertEqual(error.errno, EINVAL, "\(error)")
        XCTAssertTrue("\(error)".contains("pwrite"), "\(error)")
        XCTAssertFalse(results[1].isPublished)
        XCTAssertNil(results[1].finalName)
        XCTAssertNil(results[1].journal, "not journaled: a restart must not take it for ready")
        XCTAssertNotNil(jobs[1].part.unwritten, "kept for the next try")
        XCTAssertEqual(files("final"), ["v0.bin", "v0.bin.done", "v2.bin", "v2.bin.done"])
        let journal = try XCTUnwrap(results[0].journal)
        let states = try XCTUnwrap(SpoolStore.decodeJournal(Array(try XCTUnwrap(read("staging", journal.name)).utf8)))
        XCTAssertEqual(states.map(\.marker?.name), ["v0.bin", "v2.bin"])
    }

    func testNamingAPartWritesItsUnwrittenBytesFirst() throws {
        let job = try jobWithTail("r.0", name: "n.bin", head: "a", tail: "bc")
        try store.name(job.part)
        XCTAssertNil(job.part.unwritten)
        XCTAssertEqual(read("staging", "r.0.part"), "abc", "a named part holds all its bytes: a restart may find it")
    }
}
