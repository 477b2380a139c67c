import XCTest
final class SpoolStoreTestsPlaceholder: XCTestCase { func testNothing() {} }
