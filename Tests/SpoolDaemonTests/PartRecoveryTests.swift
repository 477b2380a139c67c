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

    /// Leaves the spool as a dead worker would: `held` (the URLs `paths`, named after them)
    /// claimed, item 0's part holding `part`, and its journal entry (phase ready) with a marker
    /// describing `journaled`. `then` runs before the worker dies (its store, the marker, the
    /// part's staging base).
    private func deadWorker(paths: [String], part: [UInt8], journaled: [UInt8], phase: ItemState.Phase = .ready,
                            then: (SpoolStore, ItemMarker, String) throws -> Void = { _, _, _ in }) throws {
        try spool.drop("held", paths.map { server.url($0) + "\nname: \($0.dropFirst()).bin\n" }.joined())
        let store = SpoolStore(layout: try SpoolLayout(root: spool.root))
        guard case .claimed = try store.claim("held") else { throw SetUpFailed.notClaimed }
        let base = SpoolStore.stagingBase("held", index: 0)
        let staged = try store.openPart(base, fresh: true)
        XCTAssertEqual(part.withUnsafeBytes { write(staged.fd, $0.baseAddress!, $0.count) }, part.count)
        let marker = ItemMarker(request: "held", group: "held", index: 0, url: server.url(paths[0]), finalURL: server.url(paths[0]),
                                name: "f.bin", bytes: Int64(journaled.count), sha256: TestBody.sha256Hex(journaled),
                                httpStatus: 200, etag: nil, lastModified: nil, contentType: nil,
                                startedAt: "2026-11-26T05:00:00.000Z", finishedAt: "2026-11-26T05:00:01.000Z", attempts: 1)
        _ = try store.writeJournal([ItemState(request: "held", index: 0, url: marker.url, phase: phase,
                                              inode: staged.inode, attempts: 1, marker: marker,
                                              finalName: phase == .published ? "f.bin" : nil)])
        try then(store, marker, base)
        store.releaseWorkerFolder()    // the worker died
    }

    /// Killed between a batch's journal and its renames: the part is complete in `staging/`.
    private func deadWorkerWithAJournaledPart(part: [UInt8], journaled: [UInt8]) throws {
        try deadWorker(paths: ["/f"], part: part, journaled: journaled)
    }

    /// Killed after the batch's marker renames but before its journal said so: item 0's file
    /// (the part's inode) and marker are in the final folder; item 1 (`/g` as `g.bin`) is open.
    private func deadWorkerWithAPublishedItem(_ body: [UInt8]) throws {
        try deadWorker(paths: ["/f", "/g"], part: body, journaled: body) { _, marker, base in
            XCTAssertEqual(rename(self.spool.path("staging", base + ".part"), self.spool.path("final", "f.bin")), 0)
            XCTAssertTrue(FileManager.default.createFile(atPath: self.spool.path("final", "f.bin.done"),
                                                         contents: Data(SpoolJSON.encode(marker: marker))))
        }
    }

    /// The next worker finds the item's file and marker and ends it published. A consumer then
    /// takes both, and that worker is killed too: the item's only trace is in the journals, and
    /// the third run must neither fetch nor deliver it again.
    func testAnItemFoundPublishedAtAdoptionIsNotDeliveredAgainOnceAConsumerTookIt() throws {
        let body = TestBody.random(count: 30_000, seed: 53)
        let second = TestBody.random(count: 4 << 20, seed: 54)
        server.serve("/f", body: body)
        server.serve("/g", body: second, etag: "\"g\"", script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(20)), .normal])
        try deadWorkerWithAPublishedItem(body)
        let adopter = try DaemonProcess.launch(["run", "--spool", spool.root, "--log-level", "debug"])
        // Logged once the request's items are recovered (and the one found published journaled).
        try adopter.waitForStderr(containing: "claimed a request", timeout: 30)
        try FileManager.default.removeItem(atPath: spool.path("final", "f.bin"))
        try FileManager.default.removeItem(atPath: spool.path("final", "f.bin.done"))
        adopter.signal(SIGKILL)
        XCTAssertEqual(try adopter.waitForExit(timeout: 10), 128 + SIGKILL)
        XCTAssertEqual(spool.claimed(), ["held"], "the premise: the request is still open")

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/f").count, 0, "found published: never fetched")
        XCTAssertEqual(spool.files(in: "final").filter { $0.hasPrefix("f") }, [], "nor delivered again")
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "g.bin")), TestBody.sha256Hex(second))
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "every journal spent")
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

    /// Killed between a batch's data rename and its marker: `f.bin` (the part's inode) is in the
    /// final folder without its marker, holding `file`; the journal vouches for `journaled`.
    private func deadWorkerWithAnUnmarkedFile(file: [UInt8], journaled: [UInt8]) throws {
        try deadWorker(paths: ["/f"], part: file, journaled: journaled) { _, _, base in
            XCTAssertEqual(rename(self.spool.path("staging", base + ".part"), self.spool.path("final", "f.bin")), 0)
        }
    }

    /// The marker a restart writes for a file it finds without one is computed from that file's
    /// bytes: the same bytes the journal vouched for get their marker without a fetch.
    func testAnUnmarkedFileWithTheJournaledDigestGetsItsMarkerWithoutAFetch() throws {
        let body = TestBody.random(count: 200_000, seed: 56)
        server.serve("/f", body: body)
        try deadWorkerWithAnUnmarkedFile(file: body, journaled: body)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/f").count, 0, "found published: not fetched")
        XCTAssertEqual(try json("final", "f.bin.done")["sha256"] as? String, TestBody.sha256Hex(try spool.read("final", "f.bin")))
    }

    /// A file without its marker whose bytes are not the journaled ones (a power cut lost its last
    /// blocks, a stray write changed it) is never given a marker: it is removed, logged with both
    /// digests, and the item is fetched again and published once, its marker describing its bytes.
    func testAnUnmarkedFileWhoseBytesAreNotTheJournaledOnesIsRemovedAndFetchedAgain() throws {
        let journaled = TestBody.random(count: 200_000, seed: 57)
        var rotten = journaled
        rotten.replaceSubrange(150_000..<200_000, with: [UInt8](repeating: 0, count: 50_000))
        server.serve("/f", body: journaled)
        try deadWorkerWithAnUnmarkedFile(file: rotten, journaled: journaled)
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(server.requests(for: "/f").count, 1, "the file is not what the journal vouched for: fetched again")
        XCTAssertTrue(stderr.contains("does not hash to the digest its journal recorded"), stderr)
        XCTAssertTrue(stderr.contains(TestBody.sha256Hex(journaled)) && stderr.contains(TestBody.sha256Hex(rotten)),
                      "both digests logged: \(stderr)")
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "f.bin")), TestBody.sha256Hex(journaled))
        XCTAssertEqual(try json("final", "f.bin.done")["sha256"] as? String, TestBody.sha256Hex(journaled))
        XCTAssertEqual(spool.files(in: "final").sorted(), ["f.bin", "f.bin.done", "held.group.done"], "published once")
    }

    /// The journal's line names `f.bin` (phase published) but another program overwrote the file
    /// before its marker. The first adopter removes it as unverified and is killed while fetching
    /// it again; the dead journal still names the file, now gone. The next run must fetch the item
    /// again (the adopter voided the line, `B.voided`), not take the missing file for consumed.
    func testAFileRemovedAsUnverifiedIsFetchedAgainAfterTheAdopterIsKilledToo() throws {
        let journaled = TestBody.random(count: 200_000, seed: 58)
        let overwritten = TestBody.random(count: 200_000, seed: 59)
        server.serve("/f", body: journaled, etag: "\"f\"", script: [.stall(afterBytes: 1000), .normal])
        try deadWorker(paths: ["/f"], part: overwritten, journaled: journaled, phase: .published) { _, _, base in
            XCTAssertEqual(rename(self.spool.path("staging", base + ".part"), self.spool.path("final", "f.bin")), 0)
        }
        let adopter = try DaemonProcess.launch(["run", "--spool", spool.root, "--log-level", "debug"])
        try DirectoryWaiter.wait(in: spool.path("final"), timeout: 30, what: "f.bin removed as unverified") {
            !FileManager.default.fileExists(atPath: self.spool.path("final", "f.bin"))
        }
        let voided = SpoolStore.stagingBase("held", index: 0) + ".voided"
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool.path("staging", voided)), "voided before the file went")
        adopter.signal(SIGKILL)
        XCTAssertEqual(try adopter.waitForExit(timeout: 10), 128 + SIGKILL)
        XCTAssertEqual(spool.claimed(), ["held"], "the premise: the request is still open")

        // The first request of `/f` stalls, whichever run made it: a stall timeout cuts it.
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--stall-timeout", "1", "--retry-base", "0.05"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "f.bin")), TestBody.sha256Hex(journaled), "not lost")
        XCTAssertEqual(try json("final", "f.bin.done")["sha256"] as? String, TestBody.sha256Hex(journaled))
        XCTAssertGreaterThanOrEqual(server.requests(for: "/f").count, 1, "fetched again")
        XCTAssertEqual(spool.leftovers(in: "staging"), [], "the voided record went with the group")
    }

    /// Leaves a dead worker's resumable part of `/f`: `part` in `staging/`, its state (phase
    /// running, ETag "v1") written in boot `boot` with `synced` bytes synced.
    private func deadWorkerWithAKeptPart(_ part: [UInt8], synced: Int64, boot: String?) throws {
        try spool.drop("held", server.url("/f") + "\nname: f.bin\n")
        let store = SpoolStore(layout: try SpoolLayout(root: spool.root))
        guard case .claimed = try store.claim("held") else { throw SetUpFailed.notClaimed }
        let base = SpoolStore.stagingBase("held", index: 0)
        let staged = try store.openPart(base, fresh: true)
        XCTAssertEqual(part.withUnsafeBytes { write(staged.fd, $0.baseAddress!, $0.count) }, part.count)
        try store.writeState(base, ItemState(request: "held", index: 0, url: server.url("/f"), phase: .running,
                                             inode: staged.inode, etag: "\"v1\"", attempts: 1,
                                             startedAt: "2026-11-26T05:00:00.000Z", syncedBytes: synced, bootID: boot))
        store.releaseWorkerFolder()    // the worker died
    }

    /// A power cut can leave a part at the length it had with its last blocks never written
    /// (zeros): resumed from its end, those zeros were published as the file's bytes, under a
    /// marker whose SHA-256 matched them. After another boot only the synced prefix is kept.
    func testAPartFromAnotherBootIsResumedFromItsSyncedPrefixOnly() throws {
        let body = TestBody.random(count: 600_000, seed: 55)
        server.serve("/f", body: body, etag: "\"v1\"")
        try deadWorkerWithAKeptPart(Array(body[0..<200_000]) + [UInt8](repeating: 0, count: 100_000),
                                    synced: 200_000, boot: "an-earlier-boot")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "f.bin")), TestBody.sha256Hex(body))
        let requests = server.requests(for: "/f")
        XCTAssertEqual(requests.map { $0.header("Range") }, ["bytes=200000-"], "resumed from the synced prefix")
    }

    /// Within the boot that wrote it, a kept part is whole (a kill loses no write): resumed from its end.
    func testAPartFromThisBootIsResumedFromItsEnd() throws {
        let body = TestBody.random(count: 600_000, seed: 56)
        server.serve("/f", body: body, etag: "\"v1\"")
        try deadWorkerWithAKeptPart(Array(body[0..<300_000]), synced: 0, boot: try XCTUnwrap(BootID.current))
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "f.bin")), TestBody.sha256Hex(body))
        XCTAssertEqual(server.requests(for: "/f").map { $0.header("Range") }, ["bytes=300000-"])
    }

    /// `--sync-every`: a large body in progress is synced every so many bytes and its `B.state`
    /// says so; after a power cut (here: a kill, then the state made another boot's and the part's
    /// unsynced tail zeroed, as a cut can leave it) the resume builds on the synced bytes.
    func testACheckpointLetsAResumeAfterAPowerCutKeepTheSyncedBytes() throws {
        let body = TestBody.random(count: 6 << 20, seed: 57)
        server.serve("/f", body: body, etag: "\"v1\"",
                     script: [.slow(chunkSize: 64 << 10, interval: .milliseconds(10)), .normal])
        try spool.drop("held", server.url("/f") + "\nname: f.bin\n")
        let daemon = try DaemonProcess.launch(["run", "--spool", spool.root, "--sync-every", "1M"])
        let base = SpoolStore.stagingBase("held", index: 0)
        let store = SpoolStore(layout: try SpoolLayout(root: spool.root))
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 30, what: "a checkpoint in \(base).state") {
            (store.readState(base)?.syncedBytes ?? 0) >= 1 << 20
        }
        daemon.signal(SIGKILL)
        XCTAssertEqual(try daemon.waitForExit(timeout: 10), 128 + SIGKILL)
        var state = try XCTUnwrap(store.readState(base))
        let synced = try XCTUnwrap(state.syncedBytes)
        XCTAssertEqual(state.bootID, BootID.current)
        // The power cut: another boot, and the part past the synced bytes never written.
        state.bootID = "an-earlier-boot"
        try store.writeState(base, state)
        let partPath = spool.path("staging", base + ".part")
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: partPath)[.size] as? Int)
        XCTAssertGreaterThanOrEqual(size, Int(synced))
        let part = try XCTUnwrap(FileHandle(forWritingAtPath: partPath))
        try part.seek(toOffset: UInt64(synced))
        try part.write(contentsOf: Data(count: size - Int(synced)))
        try part.close()

        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "f.bin")), TestBody.sha256Hex(body))
        XCTAssertEqual(server.requests(for: "/f").last?.header("Range"), "bytes=\(synced)-", "resumed from the checkpoint")
    }
}
