import Foundation
import SpoolTestSupport
import XCTest

/// Bounded inputs (issue 59): a 10 MB `header:` line is refused when the file is read, with its
/// line and the limit, before anything is queued; nothing of the file is fetched, and a good
/// request beside it is.
final class BoundedInputTests: SpoolTestCase {
    func testATenMegabyteHeaderRejectsTheFileAtItsLineAndNothingIsFetched() throws {
        server.serve("/a.bin", body: Array("a".utf8))
        server.serve("/ok.bin", body: Array("ok".utf8))
        try spool.drop("huge", "url: \(server.url("/a.bin"))\nname: a.bin\nheader: X-Huge: " + String(repeating: "h", count: 10_000_000) + "\n")
        try spool.drop("fine", "url: \(server.url("/ok.bin"))\nheader: X-Small: yes\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root)
        XCTAssertEqual(status, 1, stderr)
        XCTAssertEqual(spool.files(in: "rejected"), ["huge", "huge.error"])
        let error = try json("rejected", "huge.error")
        XCTAssertEqual(error["code"] as? String, "header-too-large", "\(error)")
        XCTAssertEqual(error["line"] as? Int, 3, "\(error)")
        let message = error["message"] as? String ?? ""
        XCTAssertTrue(message.contains("8192"), message)
        XCTAssertFalse(message.contains("hhhh"), "the value is never quoted")
        XCTAssertEqual(server.requests(for: "/a.bin").count, 0, "nothing of the rejected file is fetched")
        XCTAssertFalse(spool.files(in: "final").contains("a.bin"))
        XCTAssertEqual(try spool.read("final", "ok.bin"), Array("ok".utf8), "the good request beside it is fetched")
        XCTAssertEqual(server.requests(for: "/ok.bin").count, 1)
    }
}
