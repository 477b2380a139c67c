import Foundation
import XCTest

/// The usual end-to-end fixture: a fresh spool and an in-process HTTP server on 127.0.0.1,
/// shut down after each test.
open class SpoolTestCase: XCTestCase {
    public var server: TestHTTPServer!
    public var spool: TempSpool!

    open override func setUpWithError() throws {
        try super.setUpWithError()
        server = try TestHTTPServer.start()
        spool = try TempSpool()
    }

    open override func tearDownWithError() throws {
        try server.shutdown()
        // XCTest keeps every test case object until the run ends: what they hold must go now.
        server = nil
        spool = nil
        try super.tearDownWithError()
    }

    /// A JSON object file of the spool (a marker, an error file).
    public func json(_ folder: String, _ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(spool.read(folder, name))) as? [String: Any],
                      "\(folder)/\(name) is not a JSON object", file: file, line: line)
    }
}
