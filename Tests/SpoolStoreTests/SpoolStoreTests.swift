import Foundation
@testable import SpoolStore
import XCTest

final class SpoolStoreTests: StoreTestCase {
    func testLayoutCreatesEveryFolderWithTheRootsPermissions() throws {
        chmod(root, 0o750)
        _ = try SpoolLayout(root: root)
        for folder in SpoolLayout.folderNames {
            var st = stat()
            XCTAssertEqual(stat("\(root!)/\(folder)", &st), 0)
            XCTAssertEqual((st.st_mode & S_IFMT), S_IFDIR)
        }
        let fresh = root + "/nested"
        mkdir(fresh, 0o750)
        _ = try SpoolLayout(root: fresh)
        var st = stat()
        stat(fresh + "/staging", &st)
        XCTAssertEqual(st.st_mode & 0o777, 0o750, "created folders take the root's permissions, whatever the umask")
    }

    func testLayoutRefusesAFolderThatIsASymlink() throws {
        let other = root + "/other"
        let escaped = other + "/spool"
        try FileManager.default.createDirectory(atPath: escaped, withIntermediateDirectories: true)
        symlink("/tmp", escaped + "/done")
        XCTAssertThrowsError(try SpoolLayout(root: escaped))
    }

    func testSymlinkAndFifoAreRefusedWithoutReading() throws {
        write("tmp", "target", "secret")
        symlink("\(root!)/tmp/target", "\(root!)/incoming/link")
        guard case .refused(let code, _) = try store.claim("link") else { return XCTFail("symlink must be refused") }
        XCTAssertEqual(code, "symlink")
        mkfifo("\(root!)/incoming/pipe", 0o644)
        guard case .refused(let fifoCode, _) = try store.claim("pipe") else { return XCTFail("fifo must be refused") }
        XCTAssertEqual(fifoCode, "not-regular-file")
        try store.rejectUnclaimed("link", ErrorRecord(request: "link", code: code, message: "m"))
        XCTAssertEqual(files("rejected"), ["link", "link.error"])
        XCTAssertEqual(read("tmp", "target"), "secret", "the symlink's target is untouched")
    }

    func testClaimOfAVanishedFileIsGone() throws {
        guard case .gone = try store.claim("never-there") else { return XCTFail("expected .gone") }
    }

    func testRejectWritesTheErrorAndKeepsTheRequestUntouchedWithSuffixOnCollision() throws {
        write("rejected", "bad", "older")
        write("incoming", "bad", "garbage")
        // The older `rejected/bad` still holds the name: the new request is claimed as `bad~1`,
        // and filed under that name (one name for the request everywhere).
        guard case .claimed(let claim) = try store.claim("bad") else { return XCTFail() }
        XCTAssertEqual(claim.name, "bad~1")
        try store.reject(claim, ErrorRecord(request: "bad~1", code: "unknown-key", message: "m", line: 3))
        XCTAssertEqual(files("rejected"), ["bad", "bad~1", "bad~1.error"])
        XCTAssertEqual(read("rejected", "bad~1"), "garbage")
        XCTAssertEqual(read("rejected", "bad"), "older")
        let record = try JSONSerialization.jsonObject(with: Data(XCTUnwrap(read("rejected", "bad~1.error")).utf8)) as? [String: Any]
        XCTAssertEqual(record?["line"] as? Int, 3)
        XCTAssertEqual(record?["code"] as? String, "unknown-key")
        XCTAssertEqual(files("active/\(try store.workerFolder().name)"), [".lease", ".lock"], "no claim left")
    }

    func testPublishBatchRenamesDataThenWritesMarkers() throws {
        let jobs = try (0..<5).map { try job("r.\($0)", name: "f\($0).txt", content: "content \($0)") }
        let results = Publisher(store: store).publish(jobs)
        XCTAssertEqual(results.compactMap(\.error).count, 0)
        for i in 0..<5 {
            XCTAssertEqual(read("final", "f\(i).txt"), "content \(i)")
            XCTAssertNotNil(read("final", "f\(i).txt.done"))
        }
        XCTAssertEqual(files("final").filter { $0.hasPrefix(".") }, [])
        XCTAssertEqual(files("staging").filter { $0.hasSuffix(".part") }, [])
        let journal = try XCTUnwrap(results[0].journal)
        XCTAssertTrue(results.allSatisfy { $0.journal === journal }, "one journal for the batch")
        XCTAssertEqual(files("staging"), [journal.name], "the journal stays for the caller, until the groups end")
        XCTAssertEqual(store.readJournals().files, [], "a live worker's journal is not another worker's to recover from")
        let other = SpoolStore(layout: try SpoolLayout(root: root))
        XCTAssertEqual(other.readJournals().files, [], "its writer's folder is locked: it is alive")
    }

    func testPublishWithoutMarkersLeavesOnlyTheDataAndReportsItPublished() throws {
        var jobs = try (0..<4).map { try job("r.\($0)", name: "g\($0).txt", content: "group \($0)") }
        for i in jobs.indices { jobs[i].writesMarker = false }
        write("final", "g0.txt", "an older file")
        let results = Publisher(store: store).publish(jobs)
        XCTAssertEqual(results.compactMap(\.error).count, 0)
        XCTAssertTrue(results.allSatisfy(\.isPublished))
        XCTAssertTrue(results.allSatisfy { $0.markerPath == nil }, "no per-file marker path")
        XCTAssertEqual(results.map(\.finalName), ["g0-1.txt", "g1.txt", "g2.txt", "g3.txt"], "a taken name still gets a suffix")
        XCTAssertEqual(files("final"), ["g0-1.txt", "g0.txt", "g1.txt", "g2.txt", "g3.txt"], "no marker, no temp file")
        XCTAssertEqual(read("final", "g0-1.txt"), "group 0")
        XCTAssertEqual(read("final", "g0.txt"), "an older file")
        XCTAssertEqual(files("staging").filter { $0.hasSuffix(".part") }, [])
        XCTAssertNotNil(results[0].journal, "the journal still records each item for recovery")
    }

    private func markerName(_ file: String) throws -> String? {
        let json = try JSONSerialization.jsonObject(with: Data(try XCTUnwrap(read("final", file)).utf8)) as? [String: Any]
        return json?["name"] as? String
    }

    /// A batch's markers are written before its data is moved (one syncfs covers both): each must
    /// still name the file it describes when several files of the batch want one name and some
    /// of the names are taken.
    func testMarkersWrittenAheadNameTheFilesOfABatchThatWantsOneName() throws {
        write("final", "same.txt", "the consumer's file")
        write("final", "same-1.txt.done", "{}")
        let jobs = try (0..<3).map { try job("r.\($0)", name: "same.txt", content: "copy \($0)") }
        let results = Publisher(store: store).publish(jobs)
        XCTAssertEqual(results.compactMap(\.error).count, 0)
        XCTAssertEqual(results.map(\.finalName), ["same-2.txt", "same-3.txt", "same-4.txt"])
        for (i, name) in ["same-2.txt", "same-3.txt", "same-4.txt"].enumerated() {
            XCTAssertEqual(read("final", name), "copy \(i)")
            XCTAssertEqual(try markerName(name + ".done"), name)
        }
        XCTAssertEqual(read("final", "same.txt"), "the consumer's file")
        XCTAssertEqual(files("final").filter { $0.hasPrefix(".") }, [], "no marker temp file left")
    }

    /// A marker written ahead under the name its file was expected to get is written again when
    /// the file gets another one: here the first file of the batch cannot move (its part is gone),
    /// so the second, expected at `x-1.bin`, takes `x.bin` — and its marker must say so.
    func testMarkerWrittenAheadIsWrittenAgainWhenItsFileGetsAnotherName() throws {
        let lost = try job("r.0", name: "x.bin", content: "lost")
        let second = try job("r.1", name: "x.bin", content: "second")
        let third = try job("r.2", name: "y.bin", content: "third")
        unlink("\(root!)/staging/r.0.part")
        let results = Publisher(store: store).publish([lost, second, third])
        XCTAssertEqual(results[0].error?.errno, ENOENT)
        XCTAssertFalse(results[0].isPublished)
        XCTAssertNil(results[1].error)
        XCTAssertEqual(results[1].finalName, "x.bin")
        XCTAssertEqual(read("final", "x.bin"), "second")
        XCTAssertEqual(try markerName("x.bin.done"), "x.bin", "the marker names the file it describes")
        XCTAssertEqual(try markerName("y.bin.done"), "y.bin")
        XCTAssertTrue(results[1].isPublished && results[2].isPublished)
        XCTAssertEqual(files("final"), ["x.bin", "x.bin.done", "y.bin", "y.bin.done"], "no x-1 name, no temp file")
    }

    func testReplacingPublishTakesTheOldNameAndMarkerAndLeavesNoSuffix() throws {
        _ = Publisher(store: store).publish([try job("r.0", name: "nightly.csv", content: "old")])
        var oldStat = stat()
        XCTAssertEqual(stat("\(root!)/final/nightly.csv", &oldStat), 0)
        var replacing = try job("r.1", name: "nightly.csv", content: "the new one")
        replacing.replacesExisting = true
        let results = Publisher(store: store).publish([replacing])
        XCTAssertNil(results[0].error)
        XCTAssertEqual(results[0].finalName, "nightly.csv")
        XCTAssertEqual(files("final"), ["nightly.csv", "nightly.csv.done"], "no -N name, no temp file")
        XCTAssertEqual(read("final", "nightly.csv"), "the new one")
        var newStat = stat()
        XCTAssertEqual(stat("\(root!)/final/nightly.csv", &newStat), 0)
        XCTAssertEqual(UInt64(newStat.st_ino), replacing.part.inode, "the new part renamed over the old file")
        XCTAssertNotEqual(newStat.st_ino, oldStat.st_ino)
        let marker = try JSONSerialization.jsonObject(with: Data(read("final", "nightly.csv.done")!.utf8)) as? [String: Any]
        XCTAssertEqual(marker?["bytes"] as? Int, "the new one".utf8.count, "the marker describes the new file")

        // A retry that finds the data already replaced (its marker failed) writes the marker over any left.
        var retry = try job("r.2", name: "nightly.csv", content: "x")
        retry.replacesExisting = true
        retry.alreadyPublishedAs = "nightly.csv"
        XCTAssertNil(Publisher(store: store).publish([retry])[0].error)
        XCTAssertEqual(files("final"), ["nightly.csv", "nightly.csv.done"])
    }

    func testJournalOfAnInterruptedBatchIsReadBack() throws {
        let j = try job("r.0", name: "x.bin", content: "abc")
        // The writer holds a claim, so its worker folder outlives it (as after a kill -9).
        write("incoming", "held", "http://127.0.0.1/x\n")
        guard case .claimed = try store.claim("held") else { return XCTFail("not claimed") }
        let journal = try store.writeJournal([j.state])
        let name = journal.name
        let worker = files("active").first { !$0.hasPrefix(".") } ?? "?"
        XCTAssertTrue(name.hasPrefix("batch-\(worker)-"), "named after its worker: \(name)")
        let other = SpoolStore(layout: try SpoolLayout(root: root))
        XCTAssertEqual(store.readJournals().files, [], "its writer's own")
        XCTAssertEqual(other.readJournals().files, [], "its writer is alive")
        store.releaseWorkerFolder()   // the writer died
        let (states, files) = other.readJournals()
        XCTAssertEqual(files, [name])
        XCTAssertEqual(states["r.0"]?.phase, .ready)
        XCTAssertEqual(states["r.0"]?.inode, j.part.inode)
        XCTAssertEqual(states["r.0"]?.marker?.name, "x.bin")
    }

    func testAPublishedBatchKeepsNoDescriptorOfItsJournal() throws {
        let jobs = try (0..<3).map { try job("r.\($0)", name: "f\($0)", content: "x") }
        _ = try store.workerFolder()
        let openFiles = { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }
        let before = openFiles()
        let results = Publisher(store: store).publish(jobs)
        XCTAssertEqual(results.filter(\.isPublished).count, 3)
        XCTAssertNotNil(results[0].journal, "the journal is still there for the engine to remove")
        XCTAssertEqual(openFiles(), before, "only the parts (the jobs') stay open")
    }

    func testPublishNeverOverwritesAndNeverWritesThroughAPlantedSymlink() throws {
        write("final", "report.csv", "the consumer's file")
        write("tmp", "victim", "unchanged")
        symlink("\(root!)/tmp/victim", "\(root!)/final/report-1.csv")
        let results = Publisher(store: store).publish([try job("r.0", name: "report.csv", content: "new")])
        XCTAssertNil(results[0].error)
        XCTAssertEqual(results[0].finalName, "report-2.csv")
        XCTAssertEqual(read("final", "report.csv"), "the consumer's file")
        XCTAssertEqual(read("tmp", "victim"), "unchanged")
        XCTAssertEqual(read("final", "report-2.csv"), "new")
        let marker = try JSONSerialization.jsonObject(with: Data(read("final", "report-2.csv.done")!.utf8)) as? [String: Any]
        XCTAssertEqual(marker?["name"] as? String, "report-2.csv")
    }

    func testPublishedFileIsFoundByInodeAfterACrashBeforeItsMarker() throws {
        let j = try job("r.0", name: "data.bin", content: "x")
        let inode = j.part.inode
        _ = Publisher(store: store).publish([j])
        unlink("\(root!)/final/data.bin.done")
        XCTAssertEqual(store.findPublished(name: "data.bin", inode: inode), "data.bin")
        XCTAssertNil(store.findPublished(name: "data.bin", inode: inode + 1))
    }

    func testGroupEndWritesItsMarkerOnceEvenWhenRepeated() throws {
        write("incoming", "req", "x")
        guard case .claimed(let claim) = try store.claim("req") else { return XCTFail() }
        let marker = GroupMarker(group: "nightly", request: "req", finishedAt: "t",
                                 items: [GroupItem(index: 0, url: "u", outcome: "published")])
        let first = try store.endGroup(claim, marker: marker, failure: nil)
        XCTAssertTrue(first.markerPath.hasSuffix("/final/nightly.group.done"))
        XCTAssertEqual(files("staging"), ["req.\(claim.inode).group"], "the journal stays until the group hook has run")
        store.groupHookDone(first.journal)
        XCTAssertEqual(files("staging"), [])
        XCTAssertEqual(files("active/\(try store.workerFolder().name)"), [".lease", ".lock"], "no claim left")
        XCTAssertTrue(files("done").contains("req"))

        // Same group name the next night: a new marker, never an overwrite.
        write("incoming", "req", "y")
        guard case .claimed(let again) = try store.claim("req") else { return XCTFail() }
        XCTAssertEqual(again.name, "req~1", "done/req holds the name: the new request gets its own")
        let failure = ErrorRecord(request: "req~1", code: "items-failed", message: "1 of 1 items failed")
        let second = try store.endGroup(again, marker: marker, failure: failure)
        XCTAssertTrue(second.markerPath.hasSuffix("/final/nightly-1.group.done"))
        XCTAssertEqual(files("failed"), ["req~1", "req~1.error"])
    }

    func testGroupEndAfterACrashDoesNotWriteASecondMarker() throws {
        write("incoming", "req", "x")
        guard case .claimed(let claim) = try store.claim("req") else { return XCTFail() }
        let marker = GroupMarker(group: "g", request: "req", finishedAt: "t", items: [])
        // Simulate: the marker and its journal were written, then the daemon died before moving R.
        write("staging", "req.\(claim.inode).group", #"{"request":"req","marker":"g.group.done"}"#)
        write("final", "g.group.done", "{}")
        XCTAssertEqual(store.pendingGroupHooks().count, 0, "its request is still active: not a pending hook yet")
        var result: (markerPath: String, journal: HeldLock)? = try store.endGroup(claim, marker: marker, failure: nil)
        XCTAssertTrue(result!.markerPath.hasSuffix("/g.group.done"))
        XCTAssertEqual(files("final").filter { $0.hasSuffix(".group.done") }, ["g.group.done"])
        XCTAssertEqual(store.pendingGroupHooks().count, 0, "its worker is alive and running the hook")
        // Died again before the hook ran: the next start finds the hook still to run.
        result = nil
        let pending = store.pendingGroupHooks()
        XCTAssertEqual(pending.map(\.journal), ["req.\(claim.inode).group"])
        XCTAssertTrue(pending[0].markerPath.hasSuffix("/g.group.done"))
        // Its hook locks the journal again when it starts; while it runs nobody else takes it.
        let held = try XCTUnwrap(store.relockGroupJournal(pending[0].journal))
        XCTAssertNil(store.relockGroupJournal(pending[0].journal), "a hook runs once")
        XCTAssertEqual(store.pendingGroupHooks().count, 0, "nor is it listed as pending")
        store.groupHookDone(held)
        XCTAssertNil(store.relockGroupJournal(pending[0].journal), "once it has run, the journal is gone")
    }

    func testRepeatingAGroupEndWhoseMoveWentThroughChangesNothing() throws {
        write("incoming", "req", "x")
        guard case .claimed(let claim) = try store.claim("req") else { return XCTFail() }
        let marker = GroupMarker(group: "g", request: "req", finishedAt: "t", items: [])
        var first: (markerPath: String, journal: HeldLock)? = try store.endGroup(claim, marker: marker, failure: nil)
        let path = first!.markerPath
        first = nil   // as after a failed folder sync: the engine tries the whole group end again
        let again = try store.endGroup(claim, marker: marker, failure: nil)
        XCTAssertEqual(again.markerPath, path)
        XCTAssertEqual(files("final").filter { $0.hasPrefix("req") || $0.hasPrefix("g") }, ["g.group.done"])
        XCTAssertEqual(files("done").filter { $0.hasPrefix("req") || $0.hasPrefix("g") }, ["req"])
    }

    func testAGroupJournalOfAnEarlierSameNamedRequestIsNotMistakenForThisOne() throws {
        write("incoming", "req", "x")
        guard case .claimed(let first) = try store.claim("req") else { return XCTFail() }
        let marker = GroupMarker(group: "g", request: "req", finishedAt: "t", items: [])
        let ended = try store.endGroup(first, marker: marker, failure: nil)   // its hook is still running
        write("incoming", "req", "y")
        guard case .claimed(let second) = try store.claim("req") else { return XCTFail() }
        let again = try store.endGroup(second, marker: marker, failure: nil)
        XCTAssertTrue(again.markerPath.hasSuffix("/g-1.group.done"), "its own marker, not the earlier request's")
        XCTAssertEqual(Set(files("staging")), [ended.journal.name, again.journal.name])
    }

    func testStartUpSweepBesideALiveWorkerKeepsFreshTemporaries() throws {
        var first: WorkerRegistration? = try WorkerRegistration(layout: store.layout)
        XCTAssertTrue(first!.alone)
        first!.endStartUp()
        let second = try WorkerRegistration(layout: store.layout)
        XCTAssertFalse(second.alone, "another worker is alive")
        second.endStartUp()
        write("final", ".fresh.done.tmp", "")
        write("staging", ".old.state.tmp", "")
        var old = [timeval(tv_sec: time(nil) - 7200, tv_usec: 0), timeval(tv_sec: time(nil) - 7200, tv_usec: 0)]
        XCTAssertEqual(utimes("\(root!)/staging/.old.state.tmp", &old), 0)
        XCTAssertEqual(store.sweepTemporaries(olderThan: 3600), 1)
        XCTAssertEqual(files("final"), [".fresh.done.tmp"], "a live worker may be writing it")
        first = nil
        try withExtendedLifetime(second) {
            XCTAssertFalse(try WorkerRegistration(layout: store.layout).alone, "the second worker still lives")
        }
    }

    func testSweepRemovesOnlyTemporaries() throws {
        write("final", ".x.done.tmp", "")
        write("done", ".r.error.tmp", "")
        write("staging", ".a.state.tmp", "")
        write("done", "keep", "")
        XCTAssertEqual(store.sweepTemporaries(), 3)
        XCTAssertTrue(try WorkerRegistration(layout: store.layout).alone)
        XCTAssertEqual(files("done"), ["keep"])
    }

    func testStagingNamesFitEvenForLongRequestNames() {
        let long = String(repeating: "é", count: 127)   // 254 bytes
        let base = SpoolStore.stagingBase(long, index: 9999)
        XCTAssertLessThanOrEqual((base + ".state").utf8.count, 255)
        XCTAssertNotEqual(SpoolStore.stagingBase(long + "a"), SpoolStore.stagingBase(long + "b"))
        XCTAssertEqual(SpoolStore.stagingBase("short", index: 2), "short.2")
    }

    func testSuffixGoesBeforeTheExtension() {
        XCTAssertEqual(SpoolStore.suffixed("a.tar.gz", 1, separator: "-"), "a.tar-1.gz")
        XCTAssertEqual(SpoolStore.suffixed("noext", 2, separator: "-"), "noext-2")
        XCTAssertEqual(SpoolStore.suffixed(".hidden", 1, separator: "~"), ".hidden~1")
    }
}

final class SpoolJSONTests: XCTestCase {
    /// What JSONEncoder writes, as the spool's other files are written: the oracle of the
    /// records' one hand-written serialisation.
    static func jsonEncoder<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return [UInt8](try! encoder.encode(value)) + [0x0A]
    }

    /// Every field of a state (a segmented one's ranges, a power cut's synced prefix, a failure)
    /// and an error record with its items: one serialisation each, JSONEncoder's bytes.
    func testEveryRecordHasOneSerialisationEqualToJSONEncoders() {
        let failure = ItemFailure(index: 4, url: "http://h/\u{1}", name: "n\"", code: "http-status", message: "HTTP 404\n",
                                  attempts: 3, httpStatus: 404, curlCode: 22, curlError: "e", finalURL: "http://h/b",
                                  outageSeconds: 9)
        let running = ItemState(request: "r", index: 1, url: "u", phase: .running, inode: UInt64.max, etag: "\"e\"",
                                lastModified: "lm", bytes: 1 << 35, attempts: 2, startedAt: "s", syncedBytes: 1 << 20,
                                bootID: "b-1", refreshedURL: "https://h/p?sig=1", segments: 4,
                                ranges: [[10, 20, 30, 15], [40, 40, 50]])
        let failed = ItemState(request: "r", index: 4, url: "u", phase: .failed, attempts: 3, failure: failure)
        for state in [running, failed] {
            XCTAssertEqual(SpoolJSON.encode(record: state), Self.jsonEncoder(state))
            XCTAssertEqual(SpoolJSON.decode(ItemState.self, SpoolJSON.encode(record: state)), state)
        }
        XCTAssertEqual(SpoolJSON.encode(states: [running, failed]), Self.jsonEncoder([running, failed]))
        for record in [ErrorRecord(request: "r\t", code: "items-failed", message: "1 of 2 failed", items: [failure, failure]),
                       ErrorRecord(request: "r", code: "bad-url", message: "m", line: 3), ErrorRecord(request: "r", code: "c", message: "", items: [])] {
            XCTAssertEqual(SpoolJSON.encode(record: record), Self.jsonEncoder(record))
            XCTAssertEqual(SpoolJSON.decode(ErrorRecord.self, SpoolJSON.encode(record: record)), record)
        }
    }

    func testHandWrittenMarkerAndJournalJSONEqualJSONEncoderOutput() throws {
        let marker = ItemMarker(request: "r \"q\"", group: "g/1", index: 3, url: "http://h/a?b=c&d=\u{1}", finalURL: nil,
                                name: "naïve\\file\n", bytes: 1 << 40, sha256: "ab", httpStatus: 206, etag: "\"e\"",
                                lastModified: nil, contentType: "text/plain; charset=utf-8", startedAt: "s", finishedAt: "f",
                                attempts: 2, urlQuerySha256: "0f", source: 2)
        XCTAssertEqual(SpoolJSON.encode(marker: marker), Self.jsonEncoder(marker))
        let state = ItemState(request: "r", index: 3, url: "u", phase: .ready, inode: 42, etag: "e", bytes: 7, attempts: 1,
                              startedAt: "s", marker: marker, refreshedURL: "https://h/p?sig=1")
        let failed = ItemState(request: "r", index: 4, url: "u", phase: .failed,
                               failure: ItemFailure(index: 4, url: "u", name: "n", code: "c", message: "m", attempts: 1))
        XCTAssertEqual(SpoolJSON.encode(states: [state, failed]), Self.jsonEncoder([state, failed]))
        XCTAssertEqual(SpoolJSON.decode([ItemState].self, SpoolJSON.encode(states: [state])), [state])
        // A journal's later lines (staging base -> final name), with and without a boot: keys in
        // JSONEncoder's order, which is not a numeric or case-blind one.
        let names = ["r-10": "a", "r-9": "b\"", "R-1": "c/d", "\u{E9}-1": "\u{1}", "r-1": "e"]
        for line in [PublishedNames(published: names, boot: "b-1"), PublishedNames(published: ["r-1": "x"], boot: nil)] {
            XCTAssertEqual(SpoolJSON.encode(record: line), Self.jsonEncoder(line))
            XCTAssertEqual(SpoolJSON.decode(PublishedNames.self, SpoolJSON.encode(record: line))?.published, line.published)
        }
    }

    /// Every ASCII byte (each control character, the quote and the backslash among them), a
    /// string that is all escapes, escapes at both ends, and multi-byte characters.
    func testEveryByteIsWrittenAsJSONEncoderWritesIt() {
        let ascii = String(decoding: (0..<0x80).map { UInt8($0) }, as: UTF8.self)
        for name in [ascii, "\"\\\n", "\u{1F}a\u{0}", "plain", "", "é€😀\u{7F}\u{1B}[0m"] {
            var marker = ItemMarker(request: "r", group: "g", index: 0, url: "http://h/", finalURL: nil, name: name,
                                    bytes: 0, sha256: "", httpStatus: 200, etag: nil, lastModified: nil,
                                    contentType: nil, startedAt: "s", finishedAt: "f", attempts: 1)
            XCTAssertEqual(SpoolJSON.encode(marker: marker), Self.jsonEncoder(marker), "name \(name.debugDescription)")
            marker.url = name
            XCTAssertEqual(SpoolJSON.encode(marker: marker), Self.jsonEncoder(marker), "url \(name.debugDescription)")
        }
    }

    /// The group marker, in both modes (facts per line under `markers: group`, a marker name per
    /// line with per-file markers), with failed and unchanged lines, escapes, and no items.
    func testHandWrittenGroupMarkerEqualsJSONEncoderOutput() {
        let facts = ItemMarker(request: "r", group: "g", index: 0, url: "http://h/a", finalURL: "http://h/b\"c",
                               name: "a", bytes: 1 << 33, sha256: "ff", httpStatus: 200, etag: nil, lastModified: nil,
                               contentType: nil, startedAt: "s", finishedAt: "f", attempts: 1)
        var published = GroupItem(index: 0, url: "http://h/a", outcome: "published", file: "a-1\n")
        published.describe(facts)
        var withMarker = GroupItem(index: 1, url: "http://h/é", outcome: "published", file: "b", marker: "b.done")
        withMarker.urlQuerySha256 = "9a"
        let failed = GroupItem(index: 2, url: "http://h/\u{1}", outcome: "failed", code: "http-status",
                               message: "HTTP 404 \"Not Found\"\n")
        let unchanged = GroupItem(index: 3, url: "http://h/u", outcome: "unchanged", file: "u", marker: "u.done")
        for items in [[published, withMarker, failed, unchanged], [published], [failed], []] {
            let marker = GroupMarker(group: "g/\"1\"", request: "r\t", finishedAt: "2026-11-25T12:00:00Z", items: items)
            XCTAssertEqual(SpoolJSON.encode(groupMarker: marker), Self.jsonEncoder(marker), "\(items.count) items")
            XCTAssertEqual(SpoolJSON.decode(GroupMarker.self, SpoolJSON.encode(groupMarker: marker)), marker)
        }
    }
}
