import Foundation
import XCTest
@testable import SpoolDaemon

/// `DescriptorBudget`: how many items may hold a staging file open under an open-file limit.
final class DescriptorBudgetTests: XCTestCase {
    func testTheUsualLimitLeavesRoomForHundredsOfItems() {
        let budget = DescriptorBudget(limit: 1024)
        XCTAssertEqual(budget.openItems, (1024 - DescriptorBudget.reserve) / DescriptorBudget.perItem)
        XCTAssertEqual(budget.openItems, 256)
        XCTAssertLessThanOrEqual(budget.openItems * DescriptorBudget.perItem + DescriptorBudget.reserve, 1024,
                                 "the items' descriptors and the reserve fit the limit")
    }

    func testATinyLimitStillLetsAFewItemsRun() {
        XCTAssertEqual(DescriptorBudget(limit: 64).openItems, DescriptorBudget.minimumItems)
    }

    func testStartsAreWhatIsLeft() {
        let budget = DescriptorBudget(limit: 1024)
        XCTAssertEqual(budget.starts(withOpen: 0), 256)
        XCTAssertEqual(budget.starts(withOpen: 250), 6)
        XCTAssertEqual(budget.starts(withOpen: 256), 0)
        XCTAssertEqual(budget.starts(withOpen: 300), 0, "never negative")
    }

    func testThisProcessesBudgetComesFromItsSoftLimit() {
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        XCTAssertEqual(DescriptorBudget.ofThisProcess().limit, limit.rlim_cur == rlim_t.max ? 1 << 20 : Int(limit.rlim_cur))
    }
}
