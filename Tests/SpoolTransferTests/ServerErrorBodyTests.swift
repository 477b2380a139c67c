import XCTest
@testable import SpoolTransfer

/// An error response's reason from its body: S3's XML, the usual JSON shapes, nothing else.
final class ServerErrorBodyTests: XCTestCase {
    private func reason(_ text: String, hiding: [String?] = []) -> String? { ServerErrorBody.reason(Array(text.utf8), hiding: hiding) }

    func testS3XMLGivesCodeAndMessageAndNeverTheEchoedKey() {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match &amp; so on</Message>\
            <AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256 …</StringToSign></Error>
            """
        XCTAssertEqual(reason(body), "SignatureDoesNotMatch: The request signature we calculated does not match & so on")
        XCTAssertEqual(reason("<Error><Code>AccessDenied</Code><Message>key AKIDEXAMPLE denied</Message></Error>", hiding: ["AKIDEXAMPLE"]),
                       "AccessDenied: key … denied")
    }

    func testJSONShapes() {
        XCTAssertEqual(reason(#"{"code": "NoSuchKey", "message": "The specified key does not exist."}"#),
                       "NoSuchKey: The specified key does not exist.")
        XCTAssertEqual(reason(#"{"error": {"code": 403, "message": "Forbidden"}}"#), "403: Forbidden")
        XCTAssertEqual(reason(#"{"error": "invalid_token", "error_description": "expired"}"#), "invalid_token: expired")
        XCTAssertEqual(reason(#"{"Code": "Throttled"}"#), "Throttled")
    }

    func testOtherBodiesGiveNothingAndLongReasonsAreCut() {
        XCTAssertNil(reason("<html><head><title>404 Not Found</title></head></html>"))
        XCTAssertNil(reason("plain text"))
        XCTAssertNil(reason("{not json"))
        XCTAssertNil(reason(""))
        let long = reason("<Code>X</Code><Message>" + String(repeating: "m", count: 1000) + "\n</Message>") ?? ""
        XCTAssertEqual(long.count, ServerErrorBody.maxReason + 1)
        XCTAssertTrue(long.hasSuffix("…"))
    }
}
