import Foundation
import SpoolTestSupport
import XCTest

/// `spoolfetch retry` of a producer's own failed request after `spoolfetch init` (issue 59,
/// point 3): `failed/` is the daemon user's, so the producer cannot queue it again itself; the
/// daemon does it for the request's owner (and refuses anyone else), and the new request is still
/// the producer's. Real users this test creates; the daemon runs as its own user (`setpriv`).
final class OwnRetryTests: SpoolTestCase {
    private let accounts = TestAccounts()
    private let daemonUser = "sfTRdaemon"
    private let producer = "sfTRprod1"
    private let producer2 = "sfTRprod2"
    private let producers = "sfTRproducers"

    override func setUpWithError() throws {
        try super.setUpWithError()
        try accounts.group(producers)
        try accounts.user(daemonUser, groups: [producers])
        try accounts.user(producer, groups: [producers])
        try accounts.user(producer2, groups: [producers])
        let made = try DaemonProcess.launch(["init", "--spool", spool.root, "--user", daemonUser, "--producers", producers])
        XCTAssertEqual(try made.waitForExit(timeout: 30), 0, made.stderrText)
    }

    override func tearDownWithError() throws {
        accounts.removeAll()
        try super.tearDownWithError()
    }

    private func cli(as user: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try TestAccounts.run(as: user, [DaemonProcess.executablePath] + arguments + ["--spool", spool.root])
    }

    private func daemon() throws -> DaemonProcess {
        try DaemonProcess.launch(TestAccounts.asUser(daemonUser) + [DaemonProcess.executablePath, "run", "--spool", spool.root],
                                 executable: "/usr/bin/setpriv")
    }

    /// A request file written by `user` into `tmp/` and renamed into `incoming/`.
    private func drop(as user: String, _ name: String, _ text: String) throws {
        let tmp = spool.path("tmp", name), incoming = spool.path("incoming", name)
        let r = try TestAccounts.shell(as: user, "umask 022 && cat > '\(tmp)' <<'REQUEST'\n\(text)\nREQUEST\nmv '\(tmp)' '\(incoming)'")
        XCTAssertEqual(r.status, 0, "\(user) could not drop \(name): \(r.err)")
    }

    /// Every request file named `prefix…` in the folders a request passes through.
    private func requests(_ prefix: String) -> [String] {
        var found: [String] = []
        for folder in ["incoming", "tmp", "done", "failed"] {
            found += ((try? FileManager.default.contentsOfDirectory(atPath: spool.path(folder))) ?? [])
                .filter { $0.hasPrefix(prefix) && !$0.contains(".") }.map { folder + "/" + $0 }
        }
        let active = spool.path("active")
        for worker in (try? FileManager.default.contentsOfDirectory(atPath: active)) ?? [] {
            found += ((try? FileManager.default.contentsOfDirectory(atPath: active + "/" + worker)) ?? [])
                .filter { $0.hasPrefix(prefix) && !$0.contains(".") }.map { "active/" + worker + "/" + $0 }
        }
        return found.sorted()
    }

    func testAProducerRetriesItsOwnFailedRequestThroughTheDaemonAndNoOneElseCan() throws {
        // Both fail at once: the server has neither yet (404).
        try drop(as: producer, "late", "url: \(server.url("/late.bin"))\n")
        try drop(as: producer, "gone", "url: \(server.url("/gone.bin"))\n")
        let run = try daemon()
        defer { run.terminate() }
        try DirectoryWaiter.waitForFile("late.error", in: spool.path("failed"), timeout: 30)
        try DirectoryWaiter.waitForFile("gone.error", in: spool.path("failed"), timeout: 30)
        let denied = try TestAccounts.shell(as: producer, "touch '\(spool.path("failed", "late.retried"))'")
        XCTAssertNotEqual(denied.status, 0, "after init a producer cannot write failed/ itself")

        // Another producer: refused by the daemon, naming the owner; nothing changes.
        let foreign = try cli(as: producer2, ["retry", "late"])
        XCTAssertEqual(foreign.status, 2, foreign.out)
        XCTAssertTrue(foreign.err.contains("refused: late belongs to \(producer)"), foreign.err)
        XCTAssertTrue(run.stderrText.contains("caller=\(producer2)"), "the daemon answered it: \(run.stderrText)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("failed", "late.retried")))
        XCTAssertEqual(requests("late-retry-"), [], "no request was queued")

        // Its owner: the daemon queues it again, as the owner's.
        server.serve("/late.bin", body: Array("at last\n".utf8))
        let own = try cli(as: producer, ["retry", "late"])
        XCTAssertEqual(own.status, 0, own.err)
        XCTAssertTrue(own.out.contains("queued 1 failed item(s) of late again as incoming/late-retry-"), own.out)
        try DirectoryWaiter.waitForFile("late.bin.done", in: spool.path("final"), timeout: 30)
        XCTAssertEqual(try spool.read("final", "late.bin"), Array("at last\n".utf8))
        let marker = try json("final", "late.bin.done")
        XCTAssertEqual(marker["owner"] as? String, producer, "the retry is the producer's, not the daemon user's")
        XCTAssertEqual(marker["ownerUID"] as? Int, TestAccounts.uid(producer).map(Int.init))
        let note = try String(contentsOfFile: spool.path("failed", "late.retried"), encoding: .utf8)
        XCTAssertTrue(note.hasPrefix("incoming/late-retry-"), note)

        // A second retry queues nothing twice.
        let again = try cli(as: producer, ["retry", "late"])
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertTrue(again.out.contains("not queued twice"), again.out)
        XCTAssertEqual(requests("late-retry-").count, 1, "\(requests("late-retry-"))")
        XCTAssertEqual(server.requests(for: "/late.bin").count, 2, "one failed fetch, one retried")

        // No daemon: a clear refusal, exit 2, nothing changed.
        run.signal(SIGTERM)
        _ = try run.waitForExit(timeout: 30)
        let alone = try cli(as: producer, ["retry", "gone"])
        XCTAssertEqual(alone.status, 2, alone.out)
        XCTAssertTrue(alone.err.contains("no daemon runs on \(spool.root)")
                        && alone.err.contains("while the daemon runs, or as \(daemonUser) or root"), alone.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("failed", "gone.retried")))
        XCTAssertEqual(requests("gone-retry-"), [])
        let foreignAlone = try cli(as: producer2, ["retry", "gone"])
        XCTAssertEqual(foreignAlone.status, 2, foreignAlone.out)
        XCTAssertTrue(foreignAlone.err.contains("refused: gone belongs to \(producer)"), foreignAlone.err)
    }

    func testACommandFileForgedByAnotherProducerIsRefusedByTheDaemon() throws {
        // The client is not trusted: a command written straight into control/ by another
        // producer is checked by the daemon against the owner of failed/R.
        try drop(as: producer, "late", "url: \(server.url("/late.bin"))\n")
        let run = try daemon()
        defer { run.terminate() }
        try DirectoryWaiter.waitForFile("late.error", in: spool.path("failed"), timeout: 30)
        let command = "{\"verb\":\"retry\",\"id\":\"late\"}"
        let forged = try TestAccounts.shell(as: producer2, "umask 022 && printf '%s' '\(command)' > '\(spool.path("control", "cmd-0-forged"))'")
        XCTAssertEqual(forged.status, 0, forged.err)
        try DirectoryWaiter.waitForFile("res-0-forged", in: spool.path("control"), timeout: 30)
        let answer = try json("control", "res-0-forged")
        XCTAssertEqual(answer["ok"] as? Bool, false)
        XCTAssertEqual(answer["code"] as? String, "not-owner")
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("failed", "late.retried")))
        XCTAssertEqual(requests("late-retry-"), [])
    }

    func testACancelOfADeadWorkersRequestTellsTheProducerToWaitForADaemonAndThenWorks() throws {
        try drop(as: producer, "later", "url: \(server.url("/later.bin"))\nearliest-start: 2099-01-01T00:00:00Z\n")
        let first = try daemon()
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "later#0 waiting to start") {
            (try? self.state("later#0")) == "waiting-start"
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)

        // No daemon: the producer may not take the dead worker's folder over; it is told how.
        let alone = try cli(as: producer, ["cancel", "later"])
        XCTAssertEqual(alone.status, 2, alone.out)
        XCTAssertTrue(alone.err.contains("held by a worker that is gone") && alone.err.contains("once a daemon has taken it over")
                        && alone.err.contains("or as \(daemonUser) or root; nothing changed"), alone.err)
        XCTAssertEqual(spool.claimed(), ["later"], "still claimed where it was")
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("failed", "later")))

        // A daemon takes it over at start; then the producer's cancel reaches it.
        let second = try daemon()
        defer { second.terminate() }
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "later#0 adopted") {
            (try? self.state("later#0")) == "waiting-start"
        }
        let own = try cli(as: producer, ["cancel", "later"])
        XCTAssertEqual(own.status, 0, own.err)
        try DirectoryWaiter.waitForFile("later.error", in: spool.path("failed"), timeout: 30)
        let error = try json("failed", "later.error")
        XCTAssertEqual(error["owner"] as? String, producer)
        XCTAssertEqual((error["items"] as? [[String: Any]])?.first?["code"] as? String, "cancelled")
    }

    /// The state `status --json` gives `id`, as the producer sees it.
    private func state(_ id: String) throws -> String? {
        let r = try cli(as: producer, ["status", "--json"])
        guard let json = try? JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] else { return nil }
        return (json["tasks"] as? [[String: Any]])?.first { $0["id"] as? String == id }?["state"] as? String
    }
}
