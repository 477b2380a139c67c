import XCTest
final class SpoolRequestTestsPlaceholder: XCTestCase { func testNothing() {} }
