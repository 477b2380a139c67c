import XCTest
final class SpoolSchedulerTestsPlaceholder: XCTestCase { func testNothing() {} }
