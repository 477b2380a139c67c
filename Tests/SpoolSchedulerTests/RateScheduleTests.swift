import Foundation
import SpoolScheduler
import XCTest

/// `--max-rate` by time of day: parsing (the window's rules), the rate in force, the next change.
final class RateScheduleTests: XCTestCase {
    let utc = TimeZone(identifier: "UTC")!
    /// Midnight UTC of a fixed day.
    let midnight = Date(timeIntervalSince1970: Double(1_800_000_000 - 1_800_000_000 % 86_400))

    func at(_ h: Int, _ m: Int, _ s: Int = 0) -> Date { midnight.addingTimeInterval(Double(h * 3600 + m * 60 + s)) }

    func parse(_ text: String) throws -> RateSchedule {
        try RateSchedule(parsing: text, amount: { Int64($0) ?? ($0 == "1M" ? 1 << 20 : nil) })
    }

    func testAConstantHasNoChange() throws {
        let s = try parse("1M")
        XCTAssertEqual(s, RateSchedule(constant: 1 << 20))
        XCTAssertEqual(s.rate(at: at(3, 0), in: utc), 1 << 20)
        XCTAssertNil(s.nextChange(after: at(3, 0), in: utc))
        XCTAssertEqual(s.description, "1048576")
    }

    func testWindowsGiveTheirRateAndTheLastIsTheDefault() throws {
        let s = try parse("1M 08:00-20:00, 500 22:00-02:00, 0")
        XCTAssertEqual(s.rate(at: at(7, 59, 59), in: utc), 0)
        XCTAssertEqual(s.rate(at: at(8, 0), in: utc), 1 << 20)
        XCTAssertEqual(s.rate(at: at(19, 59, 59), in: utc), 1 << 20)
        XCTAssertEqual(s.rate(at: at(20, 0), in: utc), 0)
        XCTAssertEqual(s.rate(at: at(23, 0), in: utc), 500, "a window across midnight")
        XCTAssertEqual(s.rate(at: at(1, 0), in: utc), 500)
        XCTAssertEqual(s.nextChange(after: at(3, 0), in: utc), at(8, 0))
        XCTAssertEqual(s.nextChange(after: at(8, 0), in: utc), at(20, 0))
        XCTAssertEqual(s.nextChange(after: at(21, 0), in: utc), at(22, 0))
        XCTAssertEqual(s.nextChange(after: at(23, 0), in: utc), at(2, 0).addingTimeInterval(86_400))
        XCTAssertEqual(s.description, "1048576 08:00-20:00, 500 22:00-02:00, 0")
    }

    func testABoundaryThatKeepsTheRateIsNotAChange() throws {
        // 08:00-12:00 and 12:00-14:00 both give 1M: the change is at 14:00.
        let s = try parse("1M 08:00-12:00, 1M 12:00-14:00, 0")
        XCTAssertEqual(s.nextChange(after: at(9, 0), in: utc), at(14, 0))
        // The default equal to the window's: never a change.
        XCTAssertNil(try parse("5 08:00-09:00, 5").nextChange(after: at(1, 0), in: utc))
    }

    func testSecondsInAWindow() throws {
        let s = try parse("1M 10:00:05-10:00:15, 0")
        XCTAssertEqual(s.rate(at: at(10, 0, 4), in: utc), 0)
        XCTAssertEqual(s.rate(at: at(10, 0, 5), in: utc), 1 << 20)
        XCTAssertEqual(s.nextChange(after: at(10, 0, 0), in: utc), at(10, 0, 5))
        XCTAssertEqual(s.nextChange(after: at(10, 0, 5), in: utc), at(10, 0, 15))
        XCTAssertEqual(s.description, "1048576 10:00:05-10:00:15, 0")
    }

    func testMalformedSchedulesSayWhatIsWrong() {
        let cases: [(String, String)] = [
            ("", "is empty"),
            ("1M 08:00-20:00", "the last entry is the rate outside the windows"),
            ("1M, 0", "each entry but the last is RATE HH:MM-HH:MM"),
            ("1M 8:00-20:00, 0", "must look like 08:00-20:00"),
            ("1M 08:00-08:00, 0", "must look like 08:00-20:00"),
            ("fast 08:00-20:00, 0", "'fast' is not a byte count"),
            ("1M 08:00-20:00,", "entry 2 is empty"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try parse(text), text) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(text): \(error)")
            }
        }
    }

    func testCodableRoundTrip() throws {
        let s = try parse("1M 08:00-20:00, 0")
        let back = try JSONDecoder().decode(RateSchedule.self, from: JSONEncoder().encode(s))
        XCTAssertEqual(back, s)
    }

    func testWindowWithSecondsParsesAndRejects() {
        XCTAssertEqual(DailyWindow(parsing: "10:00:05-10:00:15")?.description, "10:00:05-10:00:15")
        XCTAssertEqual(DailyWindow(parsing: "10:00:00-11:00")?.description, "10:00-11:00")
        XCTAssertNil(DailyWindow(parsing: "10:00:60-11:00"))
        XCTAssertNil(DailyWindow(parsing: "10:00:+5-11:00"))
        XCTAssertNil(DailyWindow(parsing: "10:00:05-10:00:05"))
    }
}
