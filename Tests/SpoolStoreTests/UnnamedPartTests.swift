import CLinux
import Foundation
@testable import SpoolStore
import XCTest

/// Parts that start without a staging name (`UnnamedPartSupport`): published by one `linkat`,
/// named when they are worth resuming, and never visible before either.
final class UnnamedPartTests: StoreTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        // The tests below are about unnamed parts: a machine without them must fail here, loudly.
        XCTAssertTrue(store.layout.unnamedParts.isSupported(in: store.layout),
                      "O_TMPFILE and /proc/self/fd links are expected on the test machine's \(NSTemporaryDirectory())")
    }

    private func unnamedJob(_ base: String, name: String, content: String) throws -> PublishJob {
        let made = try job(base, name: name, content: content, unnamed: true)
        XCTAssertFalse(made.part.isNamed)
        return made
    }

    private func inode(_ folder: String, _ name: String) -> UInt64? {
        var st = stat()
        return stat("\(root!)/\(folder)/\(name)", &st) == 0 ? UInt64(st.st_ino) : nil
    }

    /// Both ways of naming an open unnamed file: linkat with AT_EMPTY_PATH (taken where the
    /// kernel allows it: Linux 6.10 or later, or as root) and the /proc/self/fd path a process
    /// falls back to.
    func testBothWaysOfNamingAnOpenFileGiveItTheNameAndNeverReplace() throws {
        let ways: [(String, (Int32, Int32, String) -> Int32)] = [
            ("preferred", { spoolfetch_link_open_file($0, $1, $2) }),
            ("via /proc", { spoolfetch_link_open_file_via_proc($0, $1, $2) }),
        ]
        let folder = store.layout.final
        for (way, link) in ways {
            let name = "\(way.filter(\.isLetter)).bin"
            for content in ["first", "second"] {
                let fd = spoolfetch_open_unnamed(folder.fd)
                XCTAssertGreaterThanOrEqual(fd, 0, way)
                defer { close(fd) }
                XCTAssertEqual(Array(content.utf8).withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }, content.utf8.count)
                let result = link(fd, folder.fd, name)
                if content == "first" {
                    XCTAssertEqual(result, 0, "\(way): \(String(cString: strerror(errno)))")
                } else {
                    XCTAssertEqual(result, -1, way)
                    XCTAssertEqual(errno, EEXIST, "\(way): a taken name fails with EEXIST")
                }
            }
            XCTAssertEqual(read("final", name), "first", "\(way): named once, never replaced")
        }
    }

    func testAnUnnamedPartLeavesNoEntryInStagingOrFinal() throws {
        let job = try unnamedJob("r.0", name: "a.bin", content: "partial")
        XCTAssertEqual(files("staging"), [], "no staging entry while it is unnamed")
        XCTAssertEqual(files("final"), [], "nothing in the final folder before it is published")
        XCTAssertEqual(job.part.size, 0, "a fresh part")
    }

    func testAnUnnamedPartIsLinkedIntoTheFinalFolderWithItsMarker() throws {
        write("final", "b.bin", "the consumer's file")
        let jobs = try [unnamedJob("r.0", name: "a.bin", content: "alpha"), unnamedJob("r.1", name: "b.bin", content: "beta"),
                        unnamedJob("r.2", name: "c.bin", content: "gamma")]
        let results = Publisher(store: store).publish(jobs)
        XCTAssertEqual(results.compactMap(\.error).count, 0)
        XCTAssertEqual(results.map(\.finalName), ["a.bin", "b-1.bin", "c.bin"], "a taken name is never replaced")
        XCTAssertEqual(read("final", "b.bin"), "the consumer's file")
        for (i, name) in ["a.bin", "b-1.bin", "c.bin"].enumerated() {
            XCTAssertEqual(inode("final", name), jobs[i].part.inode, "the part itself, linked: no copy")
            XCTAssertNotNil(read("final", name + ".done"))
        }
        XCTAssertEqual(read("final", "b-1.bin"), "beta")
        XCTAssertEqual(files("staging").filter { !$0.hasSuffix(".journal") }, [], "no part entry was ever made")
        XCTAssertEqual(files("final").filter { $0.hasPrefix(".") }, [], "no temp file left")
    }

    func testAnUnnamedPartWithoutMarkersIsPublished() throws {
        var job = try unnamedJob("r.0", name: "g.bin", content: "group")
        job.writesMarker = false
        let result = Publisher(store: store).publish([job])[0]
        XCTAssertNil(result.error)
        XCTAssertTrue(result.isPublished)
        XCTAssertEqual(files("final"), ["g.bin"])
        XCTAssertEqual(read("final", "g.bin"), "group")
    }

    func testNamingGivesThePartItsStagingNameOverALeftover() throws {
        let job = try unnamedJob("r.0", name: "a.bin", content: "kept bytes")
        write("staging", "r.0.part", "a crash's leftover")
        try store.name(job.part)
        XCTAssertTrue(job.part.isNamed)
        XCTAssertEqual(read("staging", "r.0.part"), "kept bytes")
        XCTAssertEqual(inode("staging", "r.0.part"), job.part.inode)
        try store.name(job.part)   // named already: nothing happens
        XCTAssertEqual(files("staging"), ["r.0.part"])
        let reopened = try XCTUnwrap(try store.openPartIfPresent("r.0"), "a restart finds it")
        XCTAssertEqual(reopened.size, Int64("kept bytes".utf8.count))

        // Published once named, it moves like any named part: nothing stays in staging.
        let result = Publisher(store: store).publish([job])[0]
        XCTAssertNil(result.error)
        XCTAssertEqual(read("final", "a.bin"), "kept bytes")
        XCTAssertEqual(files("staging").filter { $0.hasSuffix(".part") }, [])
    }

    func testAReplacingPublishOfAnUnnamedPartTakesTheOldName() throws {
        write("final", "nightly.csv", "old")
        write("final", "nightly.csv.done", "{}")
        var job = try unnamedJob("r.0", name: "nightly.csv", content: "the new one")
        job.replacesExisting = true
        let result = Publisher(store: store).publish([job])[0]
        XCTAssertNil(result.error)
        XCTAssertEqual(result.finalName, "nightly.csv")
        XCTAssertEqual(read("final", "nightly.csv"), "the new one")
        XCTAssertEqual(inode("final", "nightly.csv"), job.part.inode)
        XCTAssertEqual(files("final"), ["nightly.csv", "nightly.csv.done"])
        XCTAssertEqual(files("staging").filter { $0.hasSuffix(".part") }, [])
    }

    func testPartsAreNamedWhereTheFinalFolderIsOnAnotherFilesystem() throws {
        // /dev/shm is a tmpfs of its own: a link from staging cannot reach it, so the probe says
        // no and a part asked to start unnamed is named from its creation.
        var template = Array("/dev/shm/spoolfetch-final-XXXXXX".utf8CString)
        let final = try XCTUnwrap(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } },
                                  "a folder in /dev/shm")
        defer { try? FileManager.default.removeItem(atPath: final) }
        let elsewhere = SpoolStore(layout: try SpoolLayout(root: root, finalFolder: final))
        XCTAssertNotEqual(elsewhere.layout.staging.deviceID(), elsewhere.layout.final.deviceID())
        XCTAssertFalse(elsewhere.layout.unnamedParts.isSupported(in: elsewhere.layout))
        let part = try elsewhere.openPart("r.0", fresh: true, unnamed: true)
        XCTAssertTrue(part.isNamed)
        XCTAssertEqual(files("staging"), ["r.0.part"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: final), [], "the probe left nothing there")
        XCTAssertEqual(files("final"), [], "nor in the default final folder")
    }
}
