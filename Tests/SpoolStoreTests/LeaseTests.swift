import Foundation
import SpoolStore
import XCTest

/// Liveness by lease, takeover by one rename, and fencing (`WorkerLease`, `SpoolLiveness`,
/// `SpoolStore.confirmHeld`): a worker whose lease is stale loses its folder to exactly one
/// adopter, and, waking up, commits nothing of it.
final class LeaseTests: StoreTestCase {
    /// Renewals an hour apart: a test ages a lease by hand, and no renewal undoes it meanwhile.
    private let slow = LeaseSettings(period: 3600, timeout: 3 * 3600)

    private func worker() throws -> SpoolStore {
        SpoolStore(layout: store.layout, worker: try WorkerFolder(layout: store.layout, lease: slow))
    }

    /// Sets `active/FOLDER/.lease`'s times `seconds` into the past, as a worker frozen that long leaves it.
    private func age(_ folder: String, by seconds: Int) {
        let then = timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)
        var times = [then, then]
        XCTAssertEqual(utimensat(AT_FDCWD, "\(root!)/active/\(folder)/.lease", &times, 0), 0)
    }

    func testTheJudgeComparesTwoStampsOfOneFilesystem() {
        let probe = timespec(tv_sec: 1000, tv_nsec: 500_000_000)
        XCTAssertFalse(LeaseJudge.isExpired(lease: timespec(tv_sec: 971, tv_nsec: 0), probe: probe, timeout: 30))
        XCTAssertTrue(LeaseJudge.isExpired(lease: timespec(tv_sec: 970, tv_nsec: 400_000_000), probe: probe, timeout: 30))
        XCTAssertEqual(LeaseJudge.age(of: timespec(tv_sec: 999, tv_nsec: 900_000_000), at: probe), 0.6, accuracy: 1e-9)
        // A lease stamped after the probe (a renewal racing the look) is young, not old.
        XCTAssertFalse(LeaseJudge.isExpired(lease: timespec(tv_sec: 1001, tv_nsec: 0), probe: probe, timeout: 30))
    }

    func testAStaleLeaseHandsTheFolderToOneAdopterAndTheFrozenWorkerCommitsNothing() throws {
        let a = try worker()
        store = a
        let aName = try a.workerFolder().name
        write("incoming", "r", "http://x/\n")
        guard case .claimed(let claim) = try a.claim("r") else { return XCTFail("not claimed") }
        let b = try worker(), c = try worker()
        let bName = try b.workerFolder().name, cName = try c.workerFolder().name
        XCTAssertEqual(b.adoptOrphans().count, 0, "a's lease is fresh: a lives, though its process is this one")

        age(aName, by: 86_400)   // a froze a day ago
        let adopted = b.adoptOrphans()
        XCTAssertEqual(adopted.map(\.name), ["r"], "taken over, by one rename")
        XCTAssertEqual(c.adoptOrphans().count, 0, "the folder is b's now, and b's lease is fresh")
        XCTAssertEqual(files("active").filter { !$0.hasPrefix(".") }, [bName, bName + "~" + aName, cName].sorted())

        // a wakes: every commit point finds the request gone from its folder's path.
        let results = Publisher(store: a).publish([try job("r.0", name: "f.bin", content: "data")])
        XCTAssertEqual(results.map { $0.error?.isFenced }, [true], "\(results.map { $0.error.map { "\($0)" } ?? "ok" })")
        XCTAssertEqual(results.map(\.isPublished), [false])
        XCTAssertEqual(files("final"), [], "no data, no marker")
        XCTAssertEqual(files("staging").filter { $0.hasSuffix(".journal") }, [], "no journal either")
        let marker = GroupMarker(group: "g", request: "r", finishedAt: "t", items: [])
        XCTAssertThrowsError(try a.endGroup(claim, marker: marker, failure: nil)) { error in
            XCTAssertTrue((error as? StoreError)?.isFenced == true, "\(error)")
        }
        XCTAssertEqual(files("done"), [])
        XCTAssertEqual(files("final"), [], "no group marker")
        write("incoming", "s", "http://y/\n")
        guard case .lost = try a.claim("s") else { return XCTFail("a fenced worker claims nothing into its lost folder") }
        XCTAssertEqual(files("incoming"), ["s"], "left for a live worker")
        let told = Mutexed<[String]>([])
        a.onLeaseLost { reason in told.update { $0.append(reason) } }
        XCTAssertEqual(a.adoptOrphans().count, 0, "its renewal finds the lease gone with the folder")
        XCTAssertEqual(told.read { $0.count }, 1, "and says so once")
        XCTAssertTrue(told.read { $0.first ?? "" }.contains(aName))

        // b holds it whole and ends it.
        guard let first = adopted.first, case .claim(let taken) = b.takeAdopted(first) else { return XCTFail("b holds r") }
        let ended = try b.endGroup(taken, marker: marker, failure: nil)
        b.groupHookDone(ended.journal)
        XCTAssertEqual(files("done"), ["r"])
    }

    /// A fresh lease written by a process of this boot and pid namespace that is gone: taken over
    /// at once (a restart on one machine does not wait out the lease); one naming a live process,
    /// or another boot, waits for the lease.
    func testAFreshLeaseOfAProcessThatIsGoneIsTakenOverAtOnce() throws {
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        var st = stat()
        XCTAssertEqual(stat("/proc/self/ns/pid", &st), 0)
        let namespace = UInt64(st.st_ino)
        // A pid that was just used and is gone.
        var pid: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { free(argv[0]) }
        XCTAssertEqual(posix_spawn(&pid, "/bin/true", nil, nil, &argv, environ), 0)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        func fakeWorker(_ name: String, lease: String) {
            XCTAssertEqual(mkdir("\(root!)/active/\(name)", 0o755), 0)
            write("active/\(name)", ".lease", lease)
            write("active/\(name)", "req-\(name)", "http://x/\n")
        }
        fakeWorker("gone", lease: "7 boot=\(boot) pidns=\(namespace) pid=\(pid)\n")
        fakeWorker("init", lease: "7 boot=\(boot) pidns=\(namespace) pid=1\n")
        fakeWorker("elsewhere", lease: "7 boot=another-boot pidns=\(namespace) pid=\(pid)\n")
        fakeWorker("older", lease: "7\n")
        let adopter = try worker()
        XCTAssertEqual(adopter.adoptOrphans().map(\.name), ["req-gone"],
                       "only the gone process's folder; the others' leases are fresh")
    }
}
