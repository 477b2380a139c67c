import Foundation
import SpoolTestSupport
import XCTest

/// Refusals say what is wrong and what to do, on the real daemon and CLI: a `name` that is a
/// path, a URL line with text after the URL, a spool that does not exist.
final class RefusalWordingTests: SpoolTestCase {
    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = try DaemonProcess.launch(arguments)
        let status = try p.waitForExit(timeout: 30)
        return (status, p.stdoutText, p.stderrText)
    }

    func testANameThatIsAPathAndAURLLineWithTrailingTextAreRejectedAtParseTimeSayingSo() throws {
        server.serve("/x", body: Array("x".utf8))
        try spool.drop("path-name", "url: \(server.url("/x"))\nname: ../x\n")
        try spool.drop("trailing", "# nightly\n\(server.url("/x")) some words\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertTrue(server.requests(for: "/x").isEmpty, "nothing was fetched")

        let path = try json("rejected", "path-name.error")
        XCTAssertEqual(path["code"] as? String, "bad-name", "\(path)")
        XCTAssertEqual(path["line"] as? Int, 2, "\(path)")
        XCTAssertTrue((path["message"] as? String ?? "").contains("name is a path ('../x')"), "\(path)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.root + "/x"))

        let trailing = try json("rejected", "trailing.error")
        XCTAssertEqual(trailing["code"] as? String, "bad-url", "\(trailing)")
        XCTAssertEqual(trailing["line"] as? Int, 2, "\(trailing)")
        XCTAssertTrue((trailing["message"] as? String ?? "").contains("text after the URL ('some words')"), "\(trailing)")
    }

    func testAMissingSpoolSaysHowToCreateIt() throws {
        let missing = spool.root + "/no-such-spool"
        let run = try cli(["run", "--once", "--spool", missing])
        XCTAssertNotEqual(run.status, 0)
        XCTAssertTrue(run.err.contains("mkdir -p \(missing)"), run.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing), "the daemon does not make a mistyped spool")
        let status = try cli(["status", "--spool", missing])
        XCTAssertNotEqual(status.status, 0)
        XCTAssertTrue(status.err.contains("mkdir -p \(missing)"), status.err)
        let add = try cli(["add", "--spool", missing, server.url("/x")])
        XCTAssertNotEqual(add.status, 0)
        XCTAssertTrue(add.err.contains("mkdir -p \(missing)"), add.err)
    }
}
