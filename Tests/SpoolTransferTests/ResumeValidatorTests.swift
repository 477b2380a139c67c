import SpoolRequest
import SpoolTransfer
import XCTest

/// `ResumeValidator.ifRange`: what a resume sends; `ResponseFacts.validatorContradicting(_:)`:
/// which answers to it are of another version.
final class ResumeValidatorTests: XCTestCase {
    private func facts(etag: String? = nil, lastModified: String? = nil) -> ResponseFacts {
        var f = ResponseFacts()
        f.etag = etag
        f.lastModified = lastModified
        return f
    }

    private let monday = "Mon, 23 Nov 2026 10:00:00 GMT"
    private let tuesday = "Tue, 24 Nov 2026 10:00:00 GMT"

    func testTheSameETagAgrees() {
        XCTAssertNil(facts(etag: "\"v1\"").validatorContradicting("\"v1\""))
    }

    func testAnotherETagContradictsAndIsNamed() {
        XCTAssertEqual(facts(etag: "\"v2\"").validatorContradicting("\"v1\""), "\"v2\"")
        XCTAssertEqual(facts(etag: "W/\"v2\"").validatorContradicting("W/\"v1\""), "W/\"v2\"")
    }

    func testAnAnswerWithoutAValidatorOfThatKindCannotContradict() {
        XCTAssertNil(facts().validatorContradicting("\"v1\""), "no ETag in the 206: nothing to compare")
        XCTAssertNil(facts(lastModified: tuesday).validatorContradicting("\"v1\""),
                     "an ETag was sent: a Last-Modified alone says nothing about it")
        XCTAssertNil(facts(etag: "\"v2\"").validatorContradicting(monday),
                     "a date was sent (the first answer had no ETag): an ETag now says nothing about it")
    }

    func testTheSameOrAnotherLastModifiedDate() {
        XCTAssertNil(facts(lastModified: monday).validatorContradicting(monday))
        XCTAssertEqual(facts(etag: "\"v2\"", lastModified: tuesday).validatorContradicting(monday), tuesday)
    }

    func testNoValidatorSentNeverContradicts() {
        XCTAssertNil(facts(etag: "\"v2\"", lastModified: tuesday).validatorContradicting(nil))
    }

    func testIfRangeIsAStrongETagElseTheDateNeverAWeakETag() {
        XCTAssertEqual(ResumeValidator.ifRange(etag: "\"v1\"", lastModified: monday), "\"v1\"")
        XCTAssertEqual(ResumeValidator.ifRange(etag: "W/\"v1\"", lastModified: monday), monday)
        XCTAssertNil(ResumeValidator.ifRange(etag: "W/\"v1\"", lastModified: nil), "nothing safe to resume with")
        XCTAssertEqual(ResumeValidator.ifRange(etag: nil, lastModified: monday), monday)
        XCTAssertNil(ResumeValidator.ifRange(etag: nil, lastModified: nil))
    }

    func testTheFailureSaysWhatHappenedAndDropsThePart() {
        let failure = TransferFailure.resourceChanged(sent: "\"v1\"", got: "\"v2\"")
        XCTAssertEqual(failure.code, "resource-changed")
        XCTAssertTrue(failure.isTransient)
        XCTAssertTrue(failure.discardsPartial)
        XCTAssertTrue(failure.description.contains("If-Range: \"v1\""), failure.description)
        XCTAssertTrue(failure.description.contains("\"v2\""), failure.description)
        XCTAssertFalse(TransferFailure.httpStatus(500).discardsPartial)
    }
}
