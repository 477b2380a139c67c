import Foundation
import SpoolStore
import XCTest

/// `SpoolAccounts.mayRead`: the kernel's rule for a mode, which an upload is checked against
/// (`upload-not-permitted`), and `VerbPermission`, who may act on a request.
final class SpoolAccountsTests: XCTestCase {
    private func file(mode: mode_t, uid: uid_t = 1000, gid: gid_t = 100) -> stat {
        var st = stat()
        st.st_mode = S_IFREG | mode
        st.st_uid = uid
        st.st_gid = gid
        return st
    }

    func testOnlyTheFirstMatchingClassOfTheModeCounts() {
        // The owner is judged by the owner's bits alone, even when the others' would allow.
        XCTAssertFalse(SpoolAccounts.mayRead(file(mode: 0o044), uid: 1000, groups: [100]))
        XCTAssertTrue(SpoolAccounts.mayRead(file(mode: 0o400), uid: 1000, groups: []))
        // A member of the file's group by the group's bits alone.
        XCTAssertFalse(SpoolAccounts.mayRead(file(mode: 0o604), uid: 1001, groups: [100]))
        XCTAssertTrue(SpoolAccounts.mayRead(file(mode: 0o640), uid: 1001, groups: [7, 100]))
        // Anyone else by the others' bits.
        XCTAssertFalse(SpoolAccounts.mayRead(file(mode: 0o660), uid: 1002, groups: [7]))
        XCTAssertTrue(SpoolAccounts.mayRead(file(mode: 0o604), uid: 1002, groups: [7]))
        // Root reads anything (as the kernel lets it), so a root-owned request may send a 0600 file.
        XCTAssertTrue(SpoolAccounts.mayRead(file(mode: 0o000), uid: 0, groups: []))
    }

    func testTheOwnerRootTheDaemonsUserAndOperatorsMayActAndNobodyElse() {
        let rule = VerbPermission(daemonUser: 500, operators: 600)
        XCTAssertTrue(rule.allows(caller: 1000, callerGroups: [], owner: 1000))
        XCTAssertTrue(rule.allows(caller: 0, callerGroups: [], owner: 1000))
        XCTAssertTrue(rule.allows(caller: 500, callerGroups: [], owner: 1000))
        XCTAssertTrue(rule.allows(caller: 1001, callerGroups: [100, 600], owner: 1000))
        XCTAssertFalse(rule.allows(caller: 1001, callerGroups: [100], owner: 1000))
        XCTAssertFalse(VerbPermission(daemonUser: 500, operators: nil).allows(caller: 1001, callerGroups: [600], owner: 1000))
        let refusal = rule.refusal(caller: 1001, callerGroups: [], owner: 0, request: "nightly", verb: "cancel")
        XCTAssertEqual(refusal?.hasPrefix("refused: nightly belongs to root; "), true, refusal ?? "")
    }
}
