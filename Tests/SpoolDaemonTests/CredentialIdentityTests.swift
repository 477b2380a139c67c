import SpoolRequest
import XCTest
@testable import SpoolDaemon

/// A credentials file's identity lines: checked as a whole (reasons name the file and the line,
/// never a value), and taken out of the headers for the transfer.
final class CredentialIdentityTests: XCTestCase {
    private func lines(_ pairs: [(String, String)]) -> [RequestHeader] { pairs.map { RequestHeader(name: $0.0, value: $0.1) } }

    private func refusal(_ pairs: [(String, String)]) -> String? {
        do throws(PrivateFile.Refused) {
            _ = try CredentialIdentity.checked(lines(pairs), name: "n", directory: "/nonexistent")
            return nil
        } catch { return error.description }
    }

    func testProviderStrings() {
        XCTAssertTrue(CredentialIdentity.validProvider("aws:amz:eu-west-1:s3"))
        XCTAssertTrue(CredentialIdentity.validProvider("goog:goog:auto:storage"))
        for bad in ["aws:amz:eu-west-1", "aws:amz::s3", "aws:amz:eu west:s3", "aws:amz:eu-west-1:s3:x", ""] {
            XCTAssertFalse(CredentialIdentity.validProvider(bad), bad)
        }
    }

    func testIncompleteOrConflictingLinesAreRefusedWithoutTheirValues() {
        XCTAssertEqual(refusal([("AWS-Access-Key-Id", "AKID"), ("AWS-Secret-Access-Key", "SECRET")]),
                       "credentials 'n': AWS keys without an AWS-SigV4 line (AWS-SigV4: aws:amz:REGION:s3)")
        XCTAssertEqual(refusal([("AWS-SigV4", "aws:amz:eu-west-1:s3"), ("AWS-Access-Key-Id", "AKID"), ("AWS-Secret-Access-Key", "SECRET"),
                                ("Authorization", "Bearer x")]),
                       "credentials 'n': AWS-SigV4 signs with its own Authorization header; the file also has one")
        XCTAssertEqual(refusal([("aws-secret-access-key", "SECRET"), ("AWS-Secret-Access-Key", "SECRET2")]),
                       "credentials 'n': AWS-Secret-Access-Key is given twice")
        XCTAssertEqual(refusal([("Client-Key", "k.pem")]),
                       "credentials 'n': Client-Key or Client-Key-Passphrase without a Client-Certificate line")
        XCTAssertEqual(refusal([("Client-Certificate", "a/../../c.pem")]),
                       "credentials 'n': Client-Certificate must stay inside the credentials folder (no ..), or be an absolute path")
        XCTAssertEqual(refusal([("Client-Certificate", "missing.pem"), ("Client-Key", "/nonexistent/k.pem")]),
                       "credentials 'n': Client-Certificate: /nonexistent/missing.pem cannot be read: No such file or directory")
        XCTAssertEqual(refusal([("Client-Certificate", "/etc/passwd"), ("Client-Key", "/nonexistent/k.pem")]),
                       "credentials 'n': Client-Key: /nonexistent/k.pem cannot be opened: No such file or directory")
        XCTAssertEqual(refusal([("Client-Certificate", "/etc/passwd")]),
                       "credentials 'n': Client-Certificate: /etc/passwd is open to group or others (mode 644); chmod 600 it",
                       "a certificate file that holds the key (no Client-Key line) must be private")
    }

    func testSplitTakesTheIdentityOutOfTheHeaders() {
        let (headers, signing, identity) = CredentialIdentity.split(lines([
            ("Cookie", "a=b"), ("aws-sigv4", "aws:amz:eu-west-1:s3"), ("AWS-Access-Key-Id", "AKID"), ("AWS-Secret-Access-Key", "SECRET"),
            ("Client-Certificate", "/c.pem"), ("Client-Key-Passphrase", "p")]))
        XCTAssertEqual(headers.map(\.line), ["Cookie: a=b"])
        XCTAssertEqual(signing?.provider, "aws:amz:eu-west-1:s3")
        XCTAssertEqual(signing?.accessKeyId, "AKID")
        XCTAssertEqual(signing?.secretAccessKey, "SECRET")
        XCTAssertNil(signing?.sessionToken)
        XCTAssertEqual(identity?.certificate, "/c.pem")
        XCTAssertNil(identity?.key)
        XCTAssertEqual(identity?.passphrase, "p")
    }
}
