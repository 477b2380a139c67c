import Foundation
import SpoolStore
import XCTest

/// Claims into per-worker folders (`active/W/R`), adoption of a dead worker's folder, and the
/// old layout's `active/R`.
final class ClaimTests: XCTestCase {
    var root: String!
    var layout: SpoolLayout!

    override func setUpWithError() throws {
        var template = Array((NSTemporaryDirectory() + "/spoolclaims-XXXXXX").utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        layout = try SpoolLayout(root: root)
    }

    override func tearDownWithError() throws {
        layout = nil
        // rm -r: Foundation's removeItem takes minutes over 100,000 files.
        var pid: pid_t = 0
        let args = ["/bin/rm", "-rf", root!]
        var argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        XCTAssertEqual(posix_spawn(&pid, args[0], nil, nil, &argv, environ), 0)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// A worker of its own: its store and its folder in `active/`.
    private func worker() throws -> SpoolStore {
        SpoolStore(layout: layout, worker: try WorkerFolder(layout: layout))
    }

    private func write(_ folder: String, _ name: String, _ text: String) {
        _ = FileManager.default.createFile(atPath: "\(root!)/\(folder)/\(name)", contents: Data(text.utf8))
    }

    private func files(_ folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "\(root!)/\(folder)")) ?? []).sorted()
    }

    /// Every claimed request on the spool as `W/R` (or `R` for the old layout), sorted.
    private func claimed() -> [String] {
        var result: [String] = []
        for entry in files("active") where !entry.hasPrefix(".") {
            var isFolder: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: "\(root!)/active/\(entry)", isDirectory: &isFolder)
            if isFolder.boolValue {
                result += files("active/\(entry)").filter { !$0.hasPrefix(".") }.map { "\(entry)/\($0)" }
            } else {
                result.append(entry)
            }
        }
        return result.sorted()
    }

    private func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? -1
    }

    /// A dead worker's folder as `kill -9` leaves it: `.lock` that nobody holds, and requests.
    private func deadFolder(_ name: String, requests: Int, prefix: String = "r") {
        let path = "\(root!)/active/\(name)"
        XCTAssertEqual(mkdir(path, 0o755), 0)
        write("active/\(name)", ".lock", "")
        for i in 0..<requests {
            let fd = open("\(path)/\(prefix)\(i)", O_WRONLY | O_CREAT | O_EXCL, 0o644)
            let text = "http://x/\(i)\n"
            _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
            close(fd)
        }
    }

    func testClaimMovesTheFileIntoTheWorkersFolder() throws {
        let store = try worker()
        let folder = try store.workerFolder()
        write("incoming", "r1", "http://x/\n")
        guard case .claimed(let claim) = try store.claim("r1") else { return XCTFail("not claimed") }
        XCTAssertEqual(claim.name, "r1")
        XCTAssertEqual(try claim.readAll(), Array("http://x/\n".utf8))
        XCTAssertEqual(claim.path, "\(root!)/active/\(folder.name)/r1")
        XCTAssertEqual(files("incoming"), [])
        XCTAssertEqual(claimed(), ["\(folder.name)/r1"])
        XCTAssertEqual(files("active/\(folder.name)"), [".lease", ".lock", "r1"])
        XCTAssertEqual(try worker().adoptOrphans().count, 0, "a live worker's claims are not adoptable")
        XCTAssertEqual(store.adoptOrphans().count, 0, "nor its own")
        guard case .gone = try store.claim("r1") else { return XCTFail("a second claim must find it gone") }
        XCTAssertEqual(try claim.read(at: 7, count: 100), Array("x/\n".utf8), "the request can be read again later")
    }

    func testClaimsHoldNoDescriptor() throws {
        let count = 10_000
        let store = try worker()
        _ = try store.workerFolder()
        for i in 0..<count { write("incoming", "c\(i)", "http://x/\(i)\n") }
        let before = openDescriptors()
        let started = Date()
        var claims: [ClaimedRequest] = []
        for i in 0..<count {
            guard case .claimed(let claim) = try store.claim("c\(i)") else { return XCTFail("c\(i) not claimed") }
            claims.append(claim)
        }
        let seconds = Date().timeIntervalSince(started)
        XCTAssertEqual(claims.count, count)
        XCTAssertEqual(openDescriptors(), before, "\(count) claims held, no descriptor more")
        XCTAssertEqual(files("incoming"), [])
        print("claims: \(count) claimed in \(String(format: "%.3f", seconds)) s (\(Int(Double(count) / seconds))/s), descriptors \(before) before and \(openDescriptors()) after")
    }

    func testADeadWorkersClaimsAreAdoptedWithTheirNames() throws {
        var doomed: SpoolStore? = try worker()
        let doomedFolder = try doomed!.workerFolder().name
        for i in 0..<3 {
            write("incoming", "d\(i)", "http://x/\(i)\n")
            guard case .claimed = try doomed!.claim("d\(i)") else { return XCTFail() }
        }
        let survivor = try worker()
        XCTAssertEqual(survivor.adoptOrphans().count, 0, "its worker lives")
        doomed = nil   // the worker dies: its lock goes, its folder stays
        XCTAssertEqual(claimed(), ["\(doomedFolder)/d0", "\(doomedFolder)/d1", "\(doomedFolder)/d2"])
        let adopted = survivor.adoptOrphans()
        XCTAssertEqual(adopted.map(\.name).sorted(), ["d0", "d1", "d2"])
        XCTAssertEqual(try adopted.first { $0.name == "d1" }.flatMap(survivor.takenClaim)?.readAll(), Array("http://x/1\n".utf8))
        // The folder is taken over whole, by one rename to SURVIVOR~DEAD: its requests keep their
        // names, and its owner is now the survivor, whose lease is alive, so no third worker can
        // take them.
        let taken = try survivor.workerFolder().name + "~" + doomedFolder
        XCTAssertEqual(claimed(), ["\(taken)/d0", "\(taken)/d1", "\(taken)/d2"])
        XCTAssertEqual(survivor.adoptOrphans().count, 0, "and adopted once")
        XCTAssertEqual(try worker().adoptOrphans().count, 0, "the survivor is alive")
        // The survivor stops with them unfinished: the next worker adopts them.
        survivor.releaseWorkerFolder()
        XCTAssertEqual(try worker().adoptOrphans().map(\.name).sorted(), ["d0", "d1", "d2"])
    }

    func testAnInheritedFolderGoesWhenItsAdopterEndsItEmpty() throws {
        var doomed: SpoolStore? = try worker()
        let doomedFolder = try doomed!.workerFolder().name
        write("incoming", "e0", "http://x/0\n")
        guard case .claimed = try doomed!.claim("e0") else { return XCTFail() }
        doomed = nil
        let survivor = try worker()
        let adopted = survivor.adoptOrphans()
        let claim = try XCTUnwrap(adopted.first.flatMap(survivor.takenClaim))
        let ended = try survivor.endGroup(claim, marker: GroupMarker(group: "e0", request: "e0", finishedAt: "t", items: []),
                                          failure: nil)
        survivor.groupHookDone(ended.journal)
        XCTAssertTrue(files("done").contains("e0"), "filed from the inherited folder")
        survivor.releaseWorkerFolder()
        XCTAssertFalse(files("active").contains(doomedFolder), "emptied and released: the folder is gone")
    }

    func testAKilledProcessesClaimsAreKeptWhileItLivesThenAdopted() throws {
        deadFolder("otherhost-1-x", requests: 5)
        // Another process holds the folder's lock, as a live worker does, until it is killed.
        // flock -o: only flock itself holds the lock, not its child (cat), which ends when its
        // input is closed.
        let holder = try LockHolder(path: "\(root!)/active/otherhost-1-x/.lock")
        defer { holder.kill() }
        let survivor = try worker()
        XCTAssertEqual(survivor.adoptOrphans().count, 0, "the other process lives")
        holder.kill()
        XCTAssertEqual(survivor.adoptOrphans().count, 5, "killed with -9: every claim adopted")
        XCTAssertEqual(try worker().adoptOrphans().count, 0, "taken over by the survivor, whose lock it now is")
    }

    func testTwoRacingAdoptersNeverTakeTheSameRequest() throws {
        let count = 2_000
        var alive: [SpoolStore] = []   // earlier rounds' adopters stay alive, or they would be adopted too
        for round in 0..<3 {
            deadFolder("dead-\(round)", requests: count, prefix: "q\(round)-")
            let a = try worker(), b = try worker()
            alive += [a, b]
            let results = Mutexed<[[String]]>([[], []])
            let start = DispatchSemaphore(value: 0)
            let group = DispatchGroup()
            for (i, store) in [a, b].enumerated() {
                DispatchQueue.global().async(group: group) {
                    start.wait()
                    let names = store.adoptOrphans().map(\.name)
                    results.update { $0[i] = names }
                }
            }
            start.signal(); start.signal()
            XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
            let (first, second) = results.read { ($0[0], $0[1]) }
            XCTAssertEqual(first.count + second.count, count, "round \(round): every request adopted")
            XCTAssertEqual(Set(first).intersection(second), [], "round \(round): none by both")
            XCTAssertEqual(Set(first + second).count, count)
            XCTAssertTrue(first.isEmpty || second.isEmpty, "the dead worker's lock lets one adopter take it all")
            let taken = files("active").filter { $0.hasSuffix("~dead-\(round)") }
            XCTAssertEqual(taken.count, 1, "round \(round): the folder renamed once, by the winner: \(taken)")
            XCTAssertEqual(taken.first.map { files("active/" + $0).filter { !$0.hasPrefix(".") }.count }, count,
                           "each file left where it lay")
        }
    }

    func testAHundredThousandClaimsAreAdoptedQuickly() throws {
        let count = 100_000
        let setUp = Date()
        deadFolder("big-1-x", requests: count)
        print("adoption: \(count) request files written in \(String(format: "%.2f", Date().timeIntervalSince(setUp))) s")
        // The floor on this disk right now: bare renames of a tenth as many files.
        XCTAssertEqual(mkdir("\(root!)/tmp/a", 0o755), 0)
        XCTAssertEqual(mkdir("\(root!)/tmp/b", 0o755), 0)
        for i in 0..<count / 10 { close(open("\(root!)/tmp/a/\(i)", O_WRONLY | O_CREAT, 0o644)) }
        let bare = Date()
        for i in 0..<count / 10 { XCTAssertEqual(rename("\(root!)/tmp/a/\(i)", "\(root!)/tmp/b/\(i)"), 0) }
        let bareMicroseconds = Date().timeIntervalSince(bare) * 1e6 / Double(count / 10)
        let survivor = try worker()
        _ = try survivor.workerFolder()
        let started = Date()
        let adopted = survivor.adoptOrphans()
        let seconds = Date().timeIntervalSince(started)
        XCTAssertEqual(adopted.count, count)
        XCTAssertEqual(Set(adopted.map(\.name)).count, count)
        XCTAssertLessThan(seconds, 30, "adoption is one lock and a listing, whatever the count")
        print("adoption: \(count) claims of a dead worker adopted in \(String(format: "%.2f", seconds)) s"
              + " (\(String(format: "%.0f", seconds * 1e6 / Double(count))) µs each; a bare rename on this disk now:"
              + " \(String(format: "%.0f", bareMicroseconds)) µs)")
    }

    func testOldLayoutRequestsAreAdoptedOnceAndHeldOnesLeftAlone() throws {
        write("active", "old", "http://x/old\n")
        write("active", "held", "http://x/held\n")
        // An old-version worker still alive holds its request's flock.
        let heldFD = open("\(root!)/active/held", O_RDONLY)
        XCTAssertEqual(flock(heldFD, LOCK_EX | LOCK_NB), 0)
        defer { close(heldFD) }
        let store = try worker()
        let adopted = store.adoptOrphans()
        XCTAssertEqual(adopted.map(\.name), ["old"])
        XCTAssertEqual(try adopted.first.flatMap(store.takenClaim)?.readAll(), Array("http://x/old\n".utf8))
        let mine = try store.workerFolder().name
        XCTAssertEqual(claimed(), ["held", "\(mine)/old"])
        XCTAssertEqual(try worker().adoptOrphans().count, 0, "adopted once")
    }

    func testSameNamedRequestsGetASuffixAcrossWorkers() throws {
        let a = try worker(), b = try worker()
        write("incoming", "daily", "a")
        guard case .claimed(let first) = try a.claim("daily") else { return XCTFail() }
        write("incoming", "daily", "b")
        guard case .claimed(let second) = try b.claim("daily") else { return XCTFail() }
        write("incoming", "daily", "c")
        guard case .claimed(let third) = try a.claim("daily") else { return XCTFail() }
        XCTAssertEqual([first.name, second.name, third.name], ["daily", "daily~1", "daily~2"])
        XCTAssertEqual(try second.readAll(), Array("b".utf8))
        write("active", "legacy", "old layout")
        write("incoming", "legacy", "new")
        guard case .claimed(let fourth) = try b.claim("legacy") else { return XCTFail() }
        XCTAssertEqual(fourth.name, "legacy~1", "an old-layout claim's name counts too")
    }

    func testTwoClaimersOfOneIncomingFileExactlyOneWins() throws {
        let count = 500
        for i in 0..<count { write("incoming", "race\(i)", "http://x/\(i)\n") }
        let a = try worker(), b = try worker()
        let results = Mutexed<[[String]]>([[], []])
        let group = DispatchGroup()
        for (i, store) in [a, b].enumerated() {
            DispatchQueue.global().async(group: group) {
                var names: [String] = []
                for n in 0..<count {
                    if case .claimed(let claim) = try? store.claim("race\(n)") { names.append(claim.name) }
                }
                results.update { $0[i] = names }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        let (first, second) = results.read { ($0[0], $0[1]) }
        XCTAssertEqual(first.count + second.count, count)
        XCTAssertEqual(Set(first).intersection(second), [])
        XCTAssertEqual(Set(first + second), Set((0..<count).map { "race\($0)" }), "no suffix: one claim per file")
    }

    func testReleaseRemovesAnEmptyFolderAndKeepsOneWithClaims() throws {
        let idle = try worker()
        let idleName = try idle.workerFolder().name
        idle.releaseWorkerFolder()
        XCTAssertFalse(files("active").contains(idleName))
        write("incoming", "x", "http://x/\n")
        XCTAssertThrowsError(try idle.claim("x"), "a released worker claims nothing")

        let busy = try worker()
        let busyName = try busy.workerFolder().name
        guard case .claimed = try busy.claim("x") else { return XCTFail() }
        busy.releaseWorkerFolder()
        XCTAssertEqual(claimed(), ["\(busyName)/x"], "a stop with work outstanding leaves it for adoption")
        XCTAssertEqual(try worker().adoptOrphans().map(\.name), ["x"])
    }

    func testAFolderWithoutItsLockIsAStartingWorkerAndLeftAlone() throws {
        XCTAssertEqual(mkdir("\(root!)/active/starting-1-x", 0o755), 0)
        XCTAssertEqual(try worker().adoptOrphans().count, 0)
        XCTAssertTrue(files("active").contains("starting-1-x"), "fresh: it may be a worker starting")
        var old = [timeval(tv_sec: time(nil) - 7200, tv_usec: 0), timeval(tv_sec: time(nil) - 7200, tv_usec: 0)]
        XCTAssertEqual(utimes("\(root!)/active/starting-1-x", &old), 0)
        _ = try worker().adoptOrphans()
        XCTAssertFalse(files("active").contains("starting-1-x"), "an hour old: a worker that died starting")
    }

    func testRejectAndGroupEndMoveTheRequestOutOfTheWorkersFolder() throws {
        let store = try worker()
        write("incoming", "bad", "garbage")
        write("incoming", "good", "http://x/\n")
        guard case .claimed(let bad) = try store.claim("bad"), case .claimed(let good) = try store.claim("good") else { return XCTFail() }
        try store.reject(bad, ErrorRecord(request: "bad", code: "c", message: "m"))
        let marker = GroupMarker(group: "g", request: "good", finishedAt: "t", items: [])
        let ended = try store.endGroup(good, marker: marker, failure: nil)
        XCTAssertEqual(claimed(), [])
        XCTAssertEqual(files("rejected"), ["bad", "bad.error"])
        XCTAssertTrue(files("done").contains("good"))
        XCTAssertEqual(store.pendingGroupHooks().count, 0, "its worker is running the hook")
        store.groupHookDone(ended.journal)
    }

    func testAGroupHookIsPendingOnlyOnceItsRequestLeftEveryWorkersFolder() throws {
        var doomed: SpoolStore? = try worker()
        write("incoming", "req", "x")
        guard case .claimed(let claim) = try doomed!.claim("req") else { return XCTFail() }
        // The dead worker wrote the marker and its journal, then died before moving the request.
        write("staging", "req.\(claim.inode).group", #"{"request":"req","marker":"g.group.done"}"#)
        write("final", "g.group.done", "{}")
        doomed = nil
        let survivor = try worker()
        XCTAssertEqual(survivor.pendingGroupHooks().count, 0, "still claimed (by a dead worker): its group end is not over")
        let adopted = survivor.adoptOrphans()
        XCTAssertEqual(survivor.pendingGroupHooks().count, 0, "adopted: still claimed")
        let marker = GroupMarker(group: "g", request: "req", finishedAt: "t", items: [])
        let adoptedClaim = try XCTUnwrap(survivor.takenClaim(adopted[0]))
        var ended: (markerPath: String, journal: HeldLock)? = try survivor.endGroup(adoptedClaim, marker: marker, failure: nil)
        XCTAssertTrue(ended!.markerPath.hasSuffix("/g.group.done"), "the journal's marker, not a second one")
        ended = nil   // died before the hook ran
        XCTAssertEqual(try worker().pendingGroupHooks().count, 1)
    }

    /// On btrfs a power cut after a group end's move can keep the claim's old name beside the new
    /// one (one inode, two names): the adopter drops the old name instead of working the request
    /// again. A file of the same name but another inode in done/ (an earlier request) is no sign.
    func testAClaimAlreadyFiledInDoneIsDroppedNotAdopted() throws {
        var doomed: SpoolStore? = try worker()
        let folder = try doomed!.workerFolder().name
        for name in ["ended", "nightly", "rejected-one"] { write("incoming", name, "http://x/\n") }
        for name in ["ended", "nightly", "rejected-one"] {
            guard case .claimed = try doomed!.claim(name) else { return XCTFail(name) }
        }
        write("done", "nightly", "yesterday's")                       // another file of that name
        write("done", "ended", "an older one")                        // the ended one was filed as ended-1
        XCTAssertEqual(link("\(root!)/active/\(folder)/ended", "\(root!)/done/ended-1"), 0)
        XCTAssertEqual(link("\(root!)/active/\(folder)/rejected-one", "\(root!)/rejected/rejected-one"), 0)
        doomed!.releaseWorkerFolder()
        doomed = nil
        let adopter = try worker()
        let adopted = try adopter.workerFolder().name + "~" + folder
        var taken: [String: String] = [:]
        for adopted in adopter.adoptOrphans() {
            switch adopter.takeAdopted(adopted) {
            case .claim(let claim): taken[adopted.name] = "claim \(claim.name)"
            case .filed(let name, _): taken[adopted.name] = "filed \(name)"
            case .gone: taken[adopted.name] = "gone"
            }
        }
        XCTAssertEqual(taken, ["ended": "filed ended", "nightly": "claim nightly", "rejected-one": "filed rejected-one"])
        XCTAssertEqual(claimed(), ["\(adopted)/nightly"], "the filed ones' old names are gone")
        XCTAssertEqual(files("done"), ["ended", "ended-1", "nightly"])
        XCTAssertEqual(files("rejected"), ["rejected-one"])
    }

    /// A worker that died (or lost power) between a group end's move into done/ and the removal
    /// of its items' staging files: the next start removes them, and only them.
    func testTheNextStartRemovesTheStagingFilesOfAGroupThatEnded() throws {
        var doomed: SpoolStore? = try worker()
        for name in ["req", "req.5", "other"] { write("incoming", name, "http://x/\n") }
        guard case .claimed(let claim) = try doomed!.claim("req"), case .claimed = try doomed!.claim("req.5"),
              case .claimed = try doomed!.claim("other") else { return XCTFail() }
        let leftovers = ["req.0.state", "req.1.part", "req.12.state"]
        let others = ["req.5.0.state", "req.5.0.part", "other.0.state", "req.x.state", "req.3.json"]
        for name in leftovers + others { write("staging", name, "{}") }
        let marker = GroupMarker(group: "g", request: "req", finishedAt: "t", items: [])
        var ended: (markerPath: String, journal: HeldLock)? = try doomed!.endGroup(claim, marker: marker, failure: nil)
        XCTAssertEqual(doomed!.removeStagingOfEndedGroups(), 0, "its worker holds the journal: the end is under way")
        ended = nil
        doomed = nil     // died before removing the items' files and running the hook
        let next = try worker()
        XCTAssertEqual(next.removeStagingOfEndedGroups(), 3)
        let staging = files("staging")
        for name in leftovers { XCTAssertFalse(staging.contains(name), name) }
        for name in others { XCTAssertTrue(staging.contains(name), "\(name): not an item of the ended request") }
        XCTAssertEqual(next.pendingGroupHooks().count, 1, "the hook still runs: the journal stays")
    }

    /// A new request of the ended one's name is claimed under a name of its own (`nightly~1`:
    /// the ended one is filed as `nightly`), so its staging files are never taken for the ended
    /// one's leftovers, and are kept.
    func testANewRequestOfTheSameNameKeepsTheStagingFiles() throws {
        var doomed: SpoolStore? = try worker()
        write("incoming", "nightly", "http://x/\n")
        guard case .claimed(let claim) = try doomed!.claim("nightly") else { return XCTFail() }
        let marker = GroupMarker(group: "g", request: "nightly", finishedAt: "t", items: [])
        var ended: (markerPath: String, journal: HeldLock)? = try doomed!.endGroup(claim, marker: marker, failure: nil)
        ended = nil
        doomed = nil
        let live = try worker()
        write("incoming", "nightly", "http://y/\n")
        guard case .claimed(let again) = try live.claim("nightly") else { return XCTFail() }
        XCTAssertEqual(again.name, "nightly~1", "the ended request still holds its name in done/")
        write("staging", "nightly~1.0.state", "{}")
        XCTAssertEqual(try worker().removeStagingOfEndedGroups(), 0)
        XCTAssertTrue(files("staging").contains("nightly~1.0.state"))
        _ = live
    }
}

/// `flock -x -o PATH -c 'echo locked; exec cat'` in a child process: holds the lock from its
/// "locked" line until killed.
final class LockHolder {
    private var pid: pid_t = 0
    private let input: Int32

    init(path: String) throws {
        var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw CocoaError(.fileReadUnknown) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addclose(&actions, toChild[1])
        posix_spawn_file_actions_addclose(&actions, fromChild[0])
        let args = ["/usr/bin/flock", "-x", "-o", path, "-c", "echo locked; exec cat"]
        var argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        let rc = posix_spawn(&pid, args[0], &actions, nil, &argv, environ)
        close(toChild[0]); close(fromChild[1])
        input = toChild[1]
        guard rc == 0 else { close(fromChild[0]); throw CocoaError(.fileReadUnknown) }
        // Its "locked" line: the lock is held from here on.
        var line = [UInt8](repeating: 0, count: 16)
        let n = read(fromChild[0], &line, line.count)
        close(fromChild[0])
        guard n > 0, String(decoding: line[0..<n], as: UTF8.self) == "locked\n" else { throw CocoaError(.fileReadUnknown) }
    }

    /// SIGKILL, then reaps it; closing its input ends the child.
    func kill() {
        guard pid > 0 else { return }
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        pid = 0
        close(input)
    }
}

/// A value shared between test threads.
final class Mutexed<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func update(_ body: (inout Value) -> Void) { lock.lock(); body(&value); lock.unlock() }
    func read<T>(_ body: (Value) -> T) -> T { lock.lock(); defer { lock.unlock() }; return body(value) }
}

private extension SpoolStore {
    /// The claim `takeAdopted` makes of `adopted`; nil when it found the request gone or filed.
    func takenClaim(_ adopted: AdoptedClaim) -> ClaimedRequest? {
        if case .claim(let claim) = takeAdopted(adopted) { return claim }
        return nil
    }
}
