import Foundation
import SpoolTestSupport
import XCTest

/// A spool shared by several producers, as `spoolfetch init` makes it, with real users and groups
/// this test creates: the daemon runs as its own user, each producer acts as itself (`setpriv`).
/// Each attack of issue 59 (points 2–4) is a test here: forged markers, swapped folders, another
/// producer's request removed, a foreign cancel, another producer's private file uploaded.
final class SpoolOwnershipTests: SpoolTestCase {
    private let accounts = TestAccounts()
    private let daemonUser = "sfTdaemon"
    private let producer = "sfTprod1"
    private let producer2 = "sfTprod2"
    private let operatorUser = "sfTop"
    private let consumer = "sfTcons1"
    private let producers = "sfTproducers"
    private let consumers = "sfTconsumers"
    private let operators = "sfToperators"

    override func setUpWithError() throws {
        try super.setUpWithError()
        for group in [producers, consumers, operators] { try accounts.group(group) }
        try accounts.user(daemonUser, groups: [producers])
        try accounts.user(producer, groups: [producers])
        try accounts.user(producer2, groups: [producers])
        try accounts.user(operatorUser, groups: [producers, operators])
        try accounts.user(consumer, groups: [consumers])
    }

    override func tearDownWithError() throws {
        accounts.removeAll()
        try super.tearDownWithError()
    }

    // MARK: Helpers

    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText)
    }

    /// `spoolfetch ARGS` as `user`.
    private func cli(as user: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try TestAccounts.run(as: user, [DaemonProcess.executablePath] + arguments)
    }

    @discardableResult
    private func initSpool(_ extra: [String] = []) throws -> String {
        let r = try cli(["init", "--spool", spool.root, "--user", daemonUser, "--producers", producers] + extra)
        XCTAssertEqual(r.status, 0, r.err)
        return r.out
    }

    /// The daemon as its own user (`setpriv`), `run --spool SPOOL` plus `extra`.
    private func daemon(as user: String? = nil, _ extra: [String]) throws -> DaemonProcess {
        let arguments = ["run", "--spool", spool.root] + extra
        guard let user = user ?? Optional(daemonUser), user != "root" else { return try DaemonProcess.launch(arguments) }
        return try DaemonProcess.launch(TestAccounts.asUser(user) + [DaemonProcess.executablePath] + arguments,
                                        executable: "/usr/bin/setpriv")
    }

    /// A request file written by `user` into `tmp/` and renamed into `incoming/`, as a producer does.
    private func drop(as user: String, _ name: String, _ text: String) throws {
        let tmp = spool.path("tmp", name), incoming = spool.path("incoming", name)
        let r = try TestAccounts.shell(as: user, "umask 022 && cat > '\(tmp)' <<'REQUEST'\n\(text)\nREQUEST\nmv '\(tmp)' '\(incoming)'")
        XCTAssertEqual(r.status, 0, "\(user) could not drop \(name): \(r.err)")
    }

    private func status(_ path: String) -> (user: String, group: String, mode: Int)? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        let user = getpwuid(st.st_uid).map { String(cString: $0.pointee.pw_name) } ?? "\(st.st_uid)"
        let group = getgrgid(st.st_gid).map { String(cString: $0.pointee.gr_name) } ?? "\(st.st_gid)"
        return (user, group, Int(st.st_mode & 0o7777))
    }

    /// The table the README gives for `init` (consumers: the producers' group unless given).
    private func expectedLayout(consumers: String? = nil) -> [(String, String, String, Int)] {
        let c = consumers ?? producers
        var rows: [(String, String, String, Int)] = [("", daemonUser, producers, consumers == nil ? 0o750 : 0o751)]
        for name in ["incoming", "tmp", "outgoing", "control"] { rows.append((name, daemonUser, producers, 0o3770)) }
        for name in ["active", "done", "failed", "rejected", "status"] { rows.append((name, daemonUser, producers, 0o2750)) }
        rows.append(("final", daemonUser, c, 0o2750))
        for name in ["staging", "store"] { rows.append((name, daemonUser, daemonUser, 0o700)) }
        return rows
    }

    private func assertLayout(consumers: String? = nil, file: StaticString = #filePath, line: UInt = #line) {
        for (name, user, group, mode) in expectedLayout(consumers: consumers) {
            let path = name.isEmpty ? spool.root : spool.path(name)
            guard let found = status(path) else { XCTFail("\(path) is missing", file: file, line: line); continue }
            XCTAssertEqual(found.user, user, "\(path) owner", file: file, line: line)
            XCTAssertEqual(found.group, group, "\(path) group", file: file, line: line)
            XCTAssertEqual(String(found.mode, radix: 8), String(mode, radix: 8), "\(path) mode", file: file, line: line)
        }
    }

    private func task(_ id: String) throws -> [String: Any]? {
        let r = try cli(["status", "--json", "--spool", spool.root])
        guard let json = try? JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] else { return nil }
        return (json["tasks"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    private func waitForState(_ id: String, _ state: String) throws {
        try DirectoryWaiter.wait(in: spool.path("status"), timeout: 30, what: "\(id) to be \(state)") {
            (try? self.task(id)?["state"] as? String) == state
        }
    }

    /// A scratch folder anyone may write (for hooks run as the daemon's user).
    private func openFolder() throws -> String {
        let path = try TempSpool.makeScratchFolder(prefix: "spoolfetch-owners")
        XCTAssertEqual(chmod(path, 0o777), 0)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    // MARK: init

    func testInitMakesTheTableIsIdempotentAndTightensALoosenedSpool() throws {
        let first = try initSpool()
        XCTAssertTrue(first.contains("\(spool.path("final")): created"), first)
        assertLayout()
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("operators")), "no --operators, no operators file")

        let again = try initSpool()
        XCTAssertTrue(again.contains("nothing changed"), again)
        assertLayout()

        // Loosened by hand (the README's old recipe, a stray chmod, a root-owned folder).
        XCTAssertEqual(chmod(spool.path("final"), 0o2777), 0)
        XCTAssertEqual(chmod(spool.path("incoming"), 0o777), 0)
        XCTAssertEqual(chmod(spool.root, 0o2770), 0)
        XCTAssertEqual(chown(spool.path("done"), 0, 0), 0)
        let tightened = try initSpool()
        XCTAssertTrue(tightened.contains("\(spool.path("final")): mode 2777 → 2750"), tightened)
        XCTAssertTrue(tightened.contains("\(spool.path("incoming")): mode 0777 → 3770"), tightened)
        XCTAssertTrue(tightened.contains("\(spool.path("done")): owner root:root → \(daemonUser):\(producers)"), tightened)
        assertLayout()
    }

    func testInitRefusesAFolderSwappedForASymlinkAndUnknownAccounts() throws {
        let elsewhere = try openFolder()
        XCTAssertEqual(symlink(elsewhere, spool.path("final")), 0)
        let r = try cli(["init", "--spool", spool.root, "--user", daemonUser, "--producers", producers])
        XCTAssertEqual(r.status, 2, r.out)
        XCTAssertTrue(r.err.contains("\(spool.path("final"))") && r.err.contains("symlink"), r.err)
        XCTAssertEqual(status(elsewhere)?.mode, 0o777, "the symlink's target was not touched")

        let noUser = try cli(["init", "--spool", spool.root, "--user", "sfTnobody-at-all", "--producers", producers])
        XCTAssertEqual(noUser.status, 64)
        XCTAssertTrue(noUser.err.contains("no user named 'sfTnobody-at-all'"), noUser.err)
        let noGroup = try cli(["init", "--spool", spool.root, "--user", daemonUser, "--producers", "sfTnogroup"])
        XCTAssertEqual(noGroup.status, 64)
        XCTAssertTrue(noGroup.err.contains("no group named 'sfTnogroup'"), noGroup.err)
    }

    func testInitConsumersReadFinalAndProducersOutsideThatGroupDoNot() throws {
        try initSpool(["--consumers", consumers])
        assertLayout(consumers: consumers)
        XCTAssertEqual(FileManager.default.createFile(atPath: spool.path("final", "report.csv"), contents: Data("a,b\n".utf8)), true)
        let read = try TestAccounts.shell(as: consumer, "cat '\(spool.path("final", "report.csv"))'")
        XCTAssertEqual(read.status, 0, read.err)
        XCTAssertEqual(read.out, "a,b\n")
        let producerRead = try TestAccounts.shell(as: producer, "ls '\(spool.path("final"))'")
        XCTAssertNotEqual(producerRead.status, 0, "a producer outside the consumers' group cannot list final/")
        XCTAssertTrue(producerRead.err.contains("Permission denied"), producerRead.err)
        let consumerIncoming = try TestAccounts.shell(as: consumer, "ls '\(spool.path("incoming"))'")
        XCTAssertNotEqual(consumerIncoming.status, 0, "a consumer is no producer")
    }

    func testInitOperatorsIsRecordedForRunAndRemovedWithoutIt() throws {
        try initSpool(["--operators", operators])
        XCTAssertEqual(try String(contentsOfFile: spool.path("operators"), encoding: .utf8), operators + "\n")
        XCTAssertEqual(status(spool.path("operators"))?.mode, 0o644)
        XCTAssertEqual(status(spool.path("operators"))?.user, daemonUser)
        let again = try initSpool(["--operators", operators])
        XCTAssertTrue(again.contains("nothing changed"), again)
        try initSpool()
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("operators")))
    }

    // MARK: What a producer cannot do after init

    func testAProducerCannotForgeMarkersOrSwapTheDaemonsFolders() throws {
        try initSpool()
        for (folder, name) in [("final", "x.done"), ("final", "x"), ("done", "x"), ("failed", "x.error"), ("rejected", "x.error"),
                               ("status", "fake.json"), ("active", "x"), ("staging", "x.part")] {
            let forged = try TestAccounts.shell(as: producer, "echo '{}' > '\(spool.path(folder, name))'")
            XCTAssertNotEqual(forged.status, 0, "\(producer) wrote \(folder)/\(name)")
            XCTAssertTrue(forged.err.contains("Permission denied"), forged.err)
            XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path(folder, name)))
        }
        let elsewhere = try openFolder()
        for folder in ["final", "done", "failed", "rejected", "active", "staging", "status", "incoming", "control"] {
            let swapped = try TestAccounts.shell(as: producer, "mv '\(spool.path(folder))' '\(spool.path(folder)).old' || "
                                                    + "rm -rf '\(spool.path(folder))'; ln -sT '\(elsewhere)' '\(spool.path(folder))'")
            XCTAssertNotEqual(swapped.status, 0, "\(producer) swapped \(folder)/ for a symlink")
            XCTAssertEqual(status(spool.path(folder))?.user, daemonUser, "\(folder)/ is still the daemon's folder")
        }
        // What a producer may do: create entries in its four folders.
        for folder in ["incoming", "tmp", "outgoing", "control"] {
            let made = try TestAccounts.shell(as: producer, "echo x > '\(spool.path(folder, "mine"))'")
            XCTAssertEqual(made.status, 0, "\(folder): \(made.err)")
        }
        // And the daemon, as its own user, runs on the spool and keeps its modes.
        server.serve("/a.txt", body: Array("fine\n".utf8))
        try TestAccounts.shell(as: producer, "rm '\(spool.path("incoming", "mine"))'")
        try drop(as: producer, "fetch", server.url("/a.txt"))
        let run = try daemon(["--once"])
        XCTAssertEqual(try run.waitForExit(timeout: 60), 0, run.stderrText)
        XCTAssertEqual(try spool.read("final", "a.txt"), Array("fine\n".utf8))
        XCTAssertFalse(run.stderrText.contains("writable by its group or others"), run.stderrText)
        assertLayout()
    }

    func testAProducerCannotRemoveOrRenameAnotherProducersRequest() throws {
        try initSpool()
        try drop(as: producer, "theirs", server.url("/x"))
        let removed = try TestAccounts.shell(as: producer2, "rm -f '\(spool.path("incoming", "theirs"))'")
        XCTAssertNotEqual(removed.status, 0)
        XCTAssertTrue(removed.err.contains("Operation not permitted"), removed.err)
        let renamed = try TestAccounts.shell(as: producer2, "mv '\(spool.path("incoming", "theirs"))' '\(spool.path("incoming", "stolen"))'")
        XCTAssertNotEqual(renamed.status, 0)
        let replaced = try TestAccounts.shell(as: producer2, "echo 'url: http://127.0.0.1:9/' > '\(spool.path("tmp", "evil"))' && "
                                                + "mv -f '\(spool.path("tmp", "evil"))' '\(spool.path("incoming", "theirs"))'")
        XCTAssertNotEqual(replaced.status, 0, "the sticky bit keeps a rename over another's file out too")
        XCTAssertEqual(status(spool.path("incoming", "theirs"))?.user, producer)
        XCTAssertEqual(try String(contentsOfFile: spool.path("incoming", "theirs"), encoding: .utf8), server.url("/x") + "\n")
        let own = try TestAccounts.shell(as: producer, "rm '\(spool.path("incoming", "theirs"))'")
        XCTAssertEqual(own.status, 0, "its owner may: \(own.err)")
    }

    func testARequestLinkedInByAnotherProducerIsRejectedUnread() throws {
        try initSpool()
        server.serve("/never", body: Array("no\n".utf8))
        server.serve("/own", body: Array("own\n".utf8))
        // producer2's request, group-writable (umask 002): the kernel lets producer link it
        // (protected_hardlinks allows a link to a file one may read and write), and it would
        // then be producer2's request, dropped by producer.
        let victim = spool.path("tmp", "victim")
        XCTAssertEqual(try TestAccounts.shell(as: producer2, "umask 002 && echo '\(server.url("/never"))' > '\(victim)'").status, 0)
        let linked = try TestAccounts.shell(as: producer, "ln '\(victim)' '\(spool.path("incoming", "linked"))'")
        XCTAssertEqual(linked.status, 0, linked.err)
        // Maildir's delivery by the owner of a file nobody else may write is still taken.
        let mine = spool.path("tmp", "mine")
        let own = try TestAccounts.shell(as: producer, "umask 022 && echo '\(server.url("/own"))' > '\(mine)' && "
                                            + "ln '\(mine)' '\(spool.path("incoming", "mine"))'")
        XCTAssertEqual(own.status, 0, own.err)
        let run = try daemon(["--once"])
        XCTAssertEqual(try run.waitForExit(timeout: 60), 1, "a drain that rejected a request exits 1: \(run.stderrText)")
        let error = try json("rejected", "linked.error")
        XCTAssertEqual(error["code"] as? String, "hard-linked-request")
        XCTAssertTrue(server.requests(for: "/never").isEmpty, "nothing was fetched for it")
        XCTAssertEqual(try spool.read("final", "own"), Array("own\n".utf8))
        XCTAssertEqual(try json("final", "own.done")["owner"] as? String, producer)
    }

    // MARK: Owners

    func testOwnerIsInMarkersGroupMarkerEventsAndHooks() throws {
        try initSpool()
        server.serve("/owned.bin", body: Array("bytes\n".utf8))
        try drop(as: producer, "owned", "markers: item\nurl: \(server.url("/owned.bin"))\n")
        let hooks = try openFolder()
        let run = try daemon(["--once", "--on-item", "env | grep ^SPOOLFETCH_OWNER= > \(hooks)/item",
                              "--on-group", "env | grep ^SPOOLFETCH_OWNER= > \(hooks)/group"])
        XCTAssertEqual(try run.waitForExit(timeout: 60), 0, run.stderrText)
        let uid = try XCTUnwrap(TestAccounts.uid(producer))
        let marker = try json("final", "owned.bin.done")
        XCTAssertEqual(marker["owner"] as? String, producer)
        XCTAssertEqual(marker["ownerUID"] as? Int, Int(uid))
        let group = try json("final", "owned.group.done")
        XCTAssertEqual(group["owner"] as? String, producer)
        XCTAssertEqual(try String(contentsOfFile: hooks + "/item", encoding: .utf8), "SPOOLFETCH_OWNER=\(producer)\n")
        XCTAssertEqual(try String(contentsOfFile: hooks + "/group", encoding: .utf8), "SPOOLFETCH_OWNER=\(producer)\n")
        let events = try cli(as: producer, ["events", "--json", "--spool", spool.root])
        XCTAssertEqual(events.status, 0, events.err)
        let lines = events.out.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, events.out)
        for line in lines { XCTAssertTrue(line.contains("\"owner\":\"\(producer)\""), String(line)) }
    }

    func testAForeignCancelPauseResumeOrRetryIsRefusedTheOwnersAndAnOperatorsAreNot() throws {
        try initSpool(["--operators", operators])
        for name in ["mine", "other", "third"] {
            try drop(as: producer, name, "url: \(server.url("/" + name))\nearliest-start: 2099-01-01T00:00:00Z\n")
        }
        let run = try daemon([])
        defer { run.terminate() }
        for name in ["mine", "other", "third"] { try waitForState(name + "#0", "waiting-start") }

        for verb in ["cancel", "pause", "resume", "retry"] {
            for id in ["mine", "mine#0"] {
                let refused = try cli(as: producer2, [verb, id, "--spool", spool.root])
                XCTAssertEqual(refused.status, 2, "\(verb) \(id): \(refused.out)")
                XCTAssertTrue(refused.err.contains("refused: mine belongs to \(producer)"), refused.err)
                XCTAssertTrue(refused.err.contains(operators), "names who may: \(refused.err)")
            }
        }
        XCTAssertEqual(try task("mine#0")?["state"] as? String, "waiting-start", "the refused commands changed nothing")
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("failed", "mine")))
        XCTAssertTrue(run.stderrText.contains("caller=\(producer2)"), "the daemon logs who asked")

        let wide = try cli(as: producer2, ["status", "--wide", "--spool", spool.root])
        XCTAssertEqual(wide.status, 0, wide.err)
        XCTAssertTrue(wide.out.split(separator: "\n").first?.hasSuffix("\tOWNER") ?? false, wide.out)
        XCTAssertTrue(wide.out.contains("mine#0\twaiting-start\t") && wide.out.contains("\t\(producer)\n"), wide.out)

        let own = try cli(as: producer, ["cancel", "mine", "--spool", spool.root])
        XCTAssertEqual(own.status, 0, own.err)
        try DirectoryWaiter.waitForFile("mine.error", in: spool.path("failed"), timeout: 30)
        let error = try json("failed", "mine.error")
        XCTAssertEqual(error["owner"] as? String, producer)
        XCTAssertEqual((error["items"] as? [[String: Any]])?.first?["code"] as? String, "cancelled")

        // A failed request: failed/ is the daemon user's, so the daemon queues it again for its
        // owner (and refuses anyone else), as the daemon's user (see OwnRetryTests).
        try DirectoryWaiter.waitForFile("mine", in: spool.path("failed"), timeout: 30)
        let foreignRetry = try cli(as: producer2, ["retry", "mine", "--spool", spool.root])
        XCTAssertEqual(foreignRetry.status, 2, foreignRetry.out)
        XCTAssertTrue(foreignRetry.err.contains("refused: mine belongs to \(producer)"), foreignRetry.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.path("failed", "mine.retried")))
        let ownerRetry = try cli(as: producer, ["retry", "mine", "--spool", spool.root])
        XCTAssertEqual(ownerRetry.status, 0, ownerRetry.err)
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool.path("failed", "mine.retried")))
        let rootsRetry = try cli(["retry", "mine", "--spool", spool.root])
        XCTAssertEqual(rootsRetry.status, 0, rootsRetry.err)
        XCTAssertTrue(rootsRetry.out.contains("not queued twice"), rootsRetry.out)
        // The retry the daemon's user wrote is still the failed request's owner's.
        let retried = try String(contentsOfFile: spool.path("failed", "mine.retried"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "incoming/", with: "")
        try waitForState(retried + "#0", "waiting-start")
        XCTAssertEqual(try task(retried + "#0")?["owner"] as? String, producer)

        let byOperator = try cli(as: operatorUser, ["cancel", "other", "--spool", spool.root])
        XCTAssertEqual(byOperator.status, 0, byOperator.err)
        try DirectoryWaiter.waitForFile("other.error", in: spool.path("failed"), timeout: 30)
        let byDaemonUser = try cli(as: daemonUser, ["cancel", "third", "--spool", spool.root])
        XCTAssertEqual(byDaemonUser.status, 0, byDaemonUser.err)
        try DirectoryWaiter.waitForFile("third.error", in: spool.path("failed"), timeout: 30)
    }

    func testRunOperatorsFlagNamesTheOperatorsGroup() throws {
        try initSpool()
        try drop(as: producer, "job", "url: \(server.url("/job"))\nearliest-start: 2099-01-01T00:00:00Z\n")
        try drop(as: producer, "job2", "url: \(server.url("/job2"))\nearliest-start: 2099-01-01T00:00:00Z\n")
        let plain = try daemon([])
        try waitForState("job#0", "waiting-start")
        let refused = try cli(as: operatorUser, ["cancel", "job", "--spool", spool.root])
        XCTAssertEqual(refused.status, 2, "without --operators an operator is just another user: \(refused.out)")
        XCTAssertTrue(refused.err.contains("refused: job belongs to \(producer)"), refused.err)
        plain.signal(SIGTERM)
        _ = try plain.waitForExit(timeout: 30)

        let run = try daemon(["--operators", operators])
        defer { run.terminate() }
        try waitForState("job#0", "waiting-start")
        let cancelled = try cli(as: operatorUser, ["cancel", "job", "--spool", spool.root])
        XCTAssertEqual(cancelled.status, 0, cancelled.err)
        try DirectoryWaiter.waitForFile("job.error", in: spool.path("failed"), timeout: 30)
    }

    // MARK: Uploads with the owner's rights

    func testAnUploadOfAnotherProducersPrivateFileIsNotSentEvenByARootDaemon() throws {
        try initSpool()
        let secret = spool.path("outgoing", "secret.txt"), own = spool.path("outgoing", "mine.txt")
        XCTAssertEqual(try TestAccounts.shell(as: producer2, "umask 077 && echo 'producer2 secret' > '\(secret)'").status, 0)
        XCTAssertEqual(try TestAccounts.shell(as: producer, "umask 077 && echo 'my own' > '\(own)'").status, 0)
        server.acceptUploads("/bucket/secret", status: 201)
        server.acceptUploads("/bucket/mine", status: 201)
        try drop(as: producer, "steal", """
            url: \(server.url("/bucket/secret"))
            upload: secret.txt

            url: \(server.url("/bucket/mine"))
            upload: mine.txt
            """)
        // The attack of the issue: a daemon running as root, which could read anything.
        let run = try daemon(as: "root", ["--once"])
        XCTAssertEqual(try run.waitForExit(timeout: 60), 1, "a drain with a failed item exits 1: \(run.stderrText)")
        XCTAssertTrue(server.requests(for: "/bucket/secret").isEmpty, "nothing of the secret reached the server")
        XCTAssertEqual(server.uploads(at: "/bucket/mine"), [Array("my own\n".utf8)], "the owner's own 0600 file is sent")
        let error = try json("failed", "steal.error")
        let failure = try XCTUnwrap((error["items"] as? [[String: Any]])?.first)
        XCTAssertEqual(failure["code"] as? String, "upload-not-permitted")
        let message = try XCTUnwrap(failure["message"] as? String)
        XCTAssertTrue(message.contains("belongs to \(producer2):") && message.contains("mode 0600") && message.contains(producer), message)
        XCTAssertTrue(FileManager.default.fileExists(atPath: secret), "another's file stays where its owner put it")
        XCTAssertEqual(status(secret)?.user, producer2)
    }

    func testAnUploadThatItsOwnersGroupMayReadIsSentByTheDaemonsUser() throws {
        try initSpool()
        let shared = spool.path("outgoing", "shared.txt")
        // producer2's file, readable by the producers' group (setgid outgoing/ gives it that group).
        XCTAssertEqual(try TestAccounts.shell(as: producer2, "umask 027 && echo 'shared' > '\(shared)'").status, 0)
        XCTAssertEqual(status(shared)?.group, producers)
        server.acceptUploads("/bucket/shared", status: 201)
        try drop(as: producer, "send", "url: \(server.url("/bucket/shared"))\nupload: shared.txt\n")
        let run = try daemon(["--once"])
        XCTAssertEqual(try run.waitForExit(timeout: 60), 0, run.stderrText)
        XCTAssertEqual(server.uploads(at: "/bucket/shared"), [Array("shared\n".utf8)])
        XCTAssertEqual(try json("final", "shared.txt.uploaded")["owner"] as? String, producer)
    }

    // MARK: run's warning

    func testRunWarnsOnceNamingEachFolderAProducerCouldWrite() throws {
        try initSpool()
        XCTAssertEqual(chmod(spool.path("done"), 0o2770), 0)
        XCTAssertEqual(chmod(spool.path("final"), 0o2777), 0)
        let run = try daemon(["--once"])
        XCTAssertEqual(try run.waitForExit(timeout: 60), 0, run.stderrText)
        let warnings = run.stderrText.split(separator: "\n").filter { $0.contains("writable by its group or others") }
        XCTAssertEqual(warnings.count, 2, run.stderrText)
        XCTAssertTrue(warnings.contains { $0.contains("folder=\(spool.path("done"))") && $0.contains("mode=2770") }, run.stderrText)
        XCTAssertTrue(warnings.contains { $0.contains("folder=\(spool.path("final"))") && $0.contains("mode=2777") }, run.stderrText)
        XCTAssertEqual(status(spool.path("done"))?.mode, 0o2770, "a warning, not a change")
    }
}
