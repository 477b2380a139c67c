import Foundation
import XCTest
@testable import SpoolDaemon

final class RateWindowTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func testRateOverTheWindowIsNeverZeroWhileBytesAdvance() {
        var w = RateWindow()
        XCTAssertNil(w.rate, "one sample is no rate")
        w.add(bytes: 0, at: t0)
        w.add(bytes: 1000, at: t0.addingTimeInterval(1))
        XCTAssertEqual(w.rate, 1000)
        // Bursty: nothing for 3 seconds, then a burst; the window still shows progress.
        w.add(bytes: 1000, at: t0.addingTimeInterval(2))
        XCTAssertEqual(w.rate ?? 0, 500, accuracy: 0.01)
        w.add(bytes: 1000, at: t0.addingTimeInterval(3))
        XCTAssertGreaterThan(w.rate ?? 0, 0)
        w.add(bytes: 9000, at: t0.addingTimeInterval(4))
        XCTAssertEqual(w.rate ?? 0, 9000.0 / 4, accuracy: 0.01)
    }

    func testOldSamplesLeaveTheWindow() {
        var w = RateWindow()
        for s in 0...20 { w.add(bytes: Int64(s) * (s < 10 ? 100 : 1000), at: t0.addingTimeInterval(Double(s))) }
        // Only the last ~5 s count: 1000 B/s, not the slow start.
        XCTAssertEqual(w.rate ?? 0, 1000, accuracy: 1)
        XCTAssertEqual(w.eta(total: 25_000, bytes: 20_000) ?? 0, 5, accuracy: 0.01)
        XCTAssertNil(w.eta(total: nil, bytes: 20_000))
    }

    func testAStartOverResetsTheWindow() {
        var w = RateWindow()
        w.add(bytes: 5000, at: t0)
        w.add(bytes: 6000, at: t0.addingTimeInterval(1))
        w.add(bytes: 100, at: t0.addingTimeInterval(2))
        XCTAssertNil(w.rate)
    }

    func testRatesOfItemsAddUpToTheirTotal() {
        var a = RateWindow(), b = RateWindow(), total = RateWindow()
        for s in 0...8 {
            let at = t0.addingTimeInterval(Double(s))
            let ba = Int64(s * 300), bb = Int64(s * s * 50)
            a.add(bytes: ba, at: at); b.add(bytes: bb, at: at); total.add(bytes: ba + bb, at: at)
        }
        XCTAssertEqual((a.rate ?? 0) + (b.rate ?? 0), total.rate ?? 0, accuracy: 0.001)
    }
}
