import Foundation
import SpoolTestSupport
import XCTest

/// Workers sharing one spool through bindfs mounts of one folder without lock forwarding: a
/// `flock` through one mount does not exclude one through another, as on GPFS, NFS without a
/// lock manager or CIFS. Liveness must come from the leases, takeover from one rename, and a
/// worker frozen past its lease must commit nothing of what was taken over (see
/// `SharedSpoolRounds`).
final class BindfsSpoolTests: SpoolTestCase {
    private var mounts: BindfsMounts?

    override func tearDownWithError() throws {
        mounts?.unmount()
        mounts = nil
        try super.tearDownWithError()
    }

    private func twoMounts() throws -> BindfsMounts {
        let made = try BindfsMounts(count: 2)
        mounts = made
        return made
    }

    func testTheLocksOfTheTwoMountsDoNotExcludeEachOther() throws {
        // The fixture's premise, so the rounds below cannot pass on locks that happen to work.
        let m = try twoMounts()
        let one = open(m.first + "/lock", O_RDWR | O_CREAT, 0o644)
        let other = open(m.second + "/lock", O_RDWR)
        defer { close(one); close(other) }
        XCTAssertEqual(flock(one, LOCK_EX | LOCK_NB), 0)
        XCTAssertEqual(flock(other, LOCK_EX | LOCK_NB), 0, "bindfs without lock forwarding grants both")
    }

    func testTwoWorkersPublishEveryFileOnce() throws {
        let m = try twoMounts()
        try SharedSpoolRounds(server: server).twoWorkers(first: m.first, second: m.second, label: "bindfs")
    }

    func testAKilledWorkersRequestsAreTakenOverWithinTwoLeaseTimes() throws {
        let m = try twoMounts()
        try SharedSpoolRounds(server: server).firstWorkerLost(first: m.first, second: m.second, freeze: false, label: "bindfs")
    }

    func testAWorkerFrozenPastItsLeaseIsTakenOverAndCommitsNothingAfterTheThaw() throws {
        let m = try twoMounts()
        try SharedSpoolRounds(server: server).firstWorkerLost(first: m.first, second: m.second, freeze: true, label: "bindfs")
    }

    func testTenWorkersStartedTogetherOnLyingLocksClaimEveryRequestOnce() throws {
        let made = try BindfsMounts(count: 10)
        mounts = made
        try SharedSpoolRounds(server: server).startedTogether(mounts: made.mountPoints, label: "bindfs")
    }
}
