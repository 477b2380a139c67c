import Foundation
@testable import SpoolStore
import XCTest

/// The no-replace rename where the filesystem takes no rename flags (NFS, FUSE): link + unlink,
/// pinned on a local disk so it runs without a special filesystem. The FUSE end-to-end tests
/// check that the method is also chosen there on its own.
final class RenameFallbackTests: XCTestCase {
    var root: String!

    override func setUpWithError() throws {
        var template = Array((NSTemporaryDirectory() + "/spoolstore-link-XXXXXX").utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// A store whose folders all use link+unlink.
    private func linkingStore() throws -> SpoolStore {
        let layout = try SpoolLayout(root: root)
        for folder in [layout.incoming, layout.tmp, layout.active, layout.staging, layout.final, layout.done, layout.failed, layout.rejected] {
            folder.setRenameMethod(.linkThenUnlink)
        }
        return SpoolStore(layout: layout)
    }

    private func write(_ folder: String, _ name: String, _ text: String) {
        _ = FileManager.default.createFile(atPath: "\(root!)/\(folder)/\(name)", contents: Data(text.utf8))
    }
    private func read(_ folder: String, _ name: String) -> String? {
        FileManager.default.contents(atPath: "\(root!)/\(folder)/\(name)").map { String(decoding: $0, as: UTF8.self) }
    }
    private func files(_ folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "\(root!)/\(folder)")) ?? []).sorted()
    }

    func testLocalDiskProbesAsRenameNoReplaceAndLeavesNothingBehind() throws {
        let layout = try SpoolLayout(root: root)
        XCTAssertEqual(layout.incoming.renameMethod, .renameNoReplace)
        XCTAssertEqual(layout.incoming.syncMethod, .syncfs, "the test folder is on ext4/xfs/btrfs/tmpfs")
        XCTAssertTrue(layout.incoming.spaceIsKnown)
        XCTAssertNotNil(layout.incoming.freeBytes())
        XCTAssertEqual(files("incoming"), [], "the probe's file is gone")
    }

    func testATakenNameIsNeverOverwritten() throws {
        let store = try linkingStore()
        write("staging", "a", "new")
        write("done", "a", "the consumer's")
        XCTAssertThrowsError(try store.layout.staging.rename("a", to: "a", in: store.layout.done, replace: false)) {
            XCTAssertEqual(($0 as? StoreError)?.errno, EEXIST)
        }
        XCTAssertEqual(read("done", "a"), "the consumer's")
        XCTAssertEqual(read("staging", "a"), "new", "the source stays where it was")
        try store.layout.staging.rename("a", to: "b", in: store.layout.done, replace: false)
        XCTAssertEqual(read("done", "b"), "new")
        XCTAssertEqual(files("staging"), [], "moved, not copied: the old name is gone")
    }

    func testOfConcurrentMovesOfOneFileExactlyOneWins() throws {
        // Two separate openings of the folders, as two workers would have.
        let first = try linkingStore(), second = try linkingStore()
        let count = 300
        for i in 0..<count { write("incoming", "f\(i)", "\(i)") }
        let wins = [Counter(0), Counter(0)]
        let perName = (0..<count).map { _ in Counter(0) }
        let stores = [first, second]
        let group = DispatchGroup()
        for worker in 0..<2 {
            group.enter()
            Thread {
                let layout = stores[worker].layout
                for i in 0..<count {
                    if (try? layout.incoming.rename("f\(i)", to: "f\(i)", in: layout.active, replace: false)) != nil {
                        wins[worker].add()
                        perName[i].add()
                    }
                }
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(perName.map(\.value).filter { $0 != 1 }.count, 0, "every file is moved by exactly one of the two")
        XCTAssertEqual(wins[0].value + wins[1].value, count)
        XCTAssertEqual(files("incoming"), [])
        XCTAssertEqual(files("active").count, count)
    }

    func testTwoClaimersNeverBothClaimARequest() throws {
        let first = try linkingStore(), second = try linkingStore()
        let count = 200
        for i in 0..<count { write("incoming", "r\(i)", "http://x/\(i)\n") }
        let claims = [ClaimBox(), ClaimBox()]
        let stores = [first, second]
        let group = DispatchGroup()
        for worker in 0..<2 {
            group.enter()
            Thread {
                for i in 0..<count {
                    if case .claimed(let claim)? = try? stores[worker].claim("r\(i)") { claims[worker].add(claim) }
                }
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        let a = Set(claims[0].names), b = Set(claims[1].names)
        XCTAssertEqual(a.intersection(b), [], "no request is claimed by both")
        XCTAssertEqual(a.union(b).count, count, "and every one by one of them")
        // Each claim lands in its worker's folder (active/W/R), under its own name: no ~N twins.
        let claimed = files("active").filter { !$0.hasPrefix(".") }.flatMap { folder in
            files("active/" + folder).filter { !$0.hasPrefix(".") }
        }
        XCTAssertEqual(claimed.sorted(), (0..<count).map { "r\($0)" }.sorted(), "under its own name: no ~N twins")
        XCTAssertEqual(files("incoming"), [])
    }

    func testAMoveACrashLeftHalfDoneIsFinishedNotDuplicated() throws {
        let store = try linkingStore()
        write("incoming", "r", "http://x/\n")
        XCTAssertEqual(link("\(root!)/incoming/r", "\(root!)/active/r"), 0, "the crash came between link and unlink")
        XCTAssertThrowsError(try store.layout.incoming.rename("r", to: "r", in: store.layout.active, replace: false)) {
            XCTAssertEqual(($0 as? StoreError)?.errno, ENOENT, "reported as moved already")
        }
        XCTAssertEqual(files("incoming"), [])
        XCTAssertEqual(files("active"), ["r"])
    }

    func testPublishingWithLinkThenUnlinkSuffixesATakenName() throws {
        let store = try linkingStore()
        write("final", "report.csv", "the consumer's file")
        let part = try store.openPart("r.0", fresh: true)
        XCTAssertEqual(3, "new".withCString { Glibc.write(part.fd, $0, 3) })
        let marker = ItemMarker(request: "r", group: "g", index: 0, url: "http://x/report.csv", finalURL: nil,
                                name: "report.csv", bytes: 3, sha256: "00", httpStatus: 200, etag: nil,
                                lastModified: nil, contentType: nil, startedAt: "s", finishedAt: "f", attempts: 1)
        let state = ItemState(request: "r", index: 0, url: marker.url, phase: .ready, inode: part.inode, marker: marker)
        let results = Publisher(store: store).publish([PublishJob(part: part, state: state, marker: marker)])
        XCTAssertNil(results[0].error)
        XCTAssertEqual(results[0].finalName, "report-1.csv")
        XCTAssertEqual(read("final", "report.csv"), "the consumer's file")
        XCTAssertEqual(read("final", "report-1.csv"), "new")
        XCTAssertNotNil(read("final", "report-1.csv.done"))
        XCTAssertEqual(files("final").filter { $0.hasPrefix(".") }, [], "no temp or probe files left")
    }

    func testPermanentErrorsAreTheOnesRetryingCannotFix() {
        for e in [EXDEV, EINVAL, EACCES, EPERM, EROFS, EOPNOTSUPP, ENOSYS] {
            XCTAssertTrue(StoreError("x", "p", errno: e).isPermanent, "errno \(e)")
        }
        for e in [ENOSPC, EDQUOT, EIO, ENOENT, EEXIST, EAGAIN] {
            XCTAssertFalse(StoreError("x", "p", errno: e).isPermanent, "errno \(e)")
        }
    }
}

/// A counter several threads bump.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count: Int
    init(_ count: Int) { self.count = count }
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

/// Claims one thread made, kept alive (each holds its lock) until the test ends.
private final class ClaimBox: @unchecked Sendable {
    private let lock = NSLock()
    private var claims: [ClaimedRequest] = []
    func add(_ claim: ClaimedRequest) { lock.lock(); claims.append(claim); lock.unlock() }
    var names: [String] { lock.lock(); defer { lock.unlock() }; return claims.map(\.name) }
}
