import Dispatch
import Synchronization
import Foundation
import SpoolStore
import XCTest

/// Two workers' start-ups never overlap: the second waits while the first, started alone, holds
/// the registration exclusively.
final class WorkerRegistrationTests: StoreTestCase {
    func testASecondWorkerWaitsUntilTheFirstHasEndedItsStartUp() throws {
        let first = try WorkerRegistration(layout: store.layout)
        XCTAssertTrue(first.alone)
        let registered = DispatchSemaphore(value: 0)
        let second = Mutex<WorkerRegistration?>(nil)
        let layout = store.layout
        Thread.detachNewThread {
            let registration = try? WorkerRegistration(layout: layout)
            second.withLock { $0 = registration }
            registered.signal()
        }
        // Waiting is what is asserted here: had it not waited, it would be done at once.
        XCTAssertEqual(registered.wait(timeout: .now() + 0.5), .timedOut, "it waits while the first one starts")
        first.endStartUp()
        XCTAssertEqual(registered.wait(timeout: .now() + 10), .success, "and goes on once the first has started")
        let joined = try XCTUnwrap(second.withLock { $0 })
        XCTAssertFalse(joined.alone)
        withExtendedLifetime(first) {}
    }

    func testAWorkerJoinsRunningWorkersAtOnce() throws {
        let first = try WorkerRegistration(layout: store.layout)
        first.endStartUp()
        let second = try WorkerRegistration(layout: store.layout)
        XCTAssertFalse(second.alone, "another worker is alive")
        withExtendedLifetime(first) {}
    }
}
