import Foundation
import Logging
@testable import SpoolDaemon
import Synchronization
import XCTest

/// Log lines: kept in memory for assertions.
final class LogCapture: Sendable {
    private let captured = Mutex<[String]>([])
    let level: LogLevelSetting

    init(level: Logger.Level = .debug) { self.level = LogLevelSetting(level) }

    func logger(journal: Bool = false) -> Logger {
        Logger(label: "test") { [self] label in
            LogfmtHandler(label: label, level: level, journal: journal) { line in self.captured.withLock { $0.append(line) } }
        }
    }

    var lines: [String] { captured.withLock { $0 } }
    func lines(containing text: String) -> [String] { lines.filter { $0.contains(text) } }
}

final class LogTests: XCTestCase {
    func testJournalStreamMustNameStderrsOwnDeviceAndInode() throws {
        XCTAssertTrue(JournalStream.matches("2049:123456", device: 2049, inode: 123456))
        XCTAssertFalse(JournalStream.matches("2049:123457", device: 2049, inode: 123456))
        XCTAssertFalse(JournalStream.matches("2049", device: 2049, inode: 123456))
        XCTAssertFalse(JournalStream.matches("x:1", device: 0, inode: 1))
        XCTAssertFalse(JournalStream.matches("", device: 0, inode: 0))

        var info = stat()
        XCTAssertEqual(fstat(STDERR_FILENO, &info), 0)
        let mine = "\(info.st_dev):\(info.st_ino)"
        XCTAssertTrue(JournalStream.isStandardError(environment: ["JOURNAL_STREAM": mine]))
        XCTAssertFalse(JournalStream.isStandardError(environment: ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino + 1)"]),
                       "inherited from a parent whose stderr was the journal, but ours is not")
        XCTAssertFalse(JournalStream.isStandardError(environment: [:]))
    }

    func testPriorityPrefixOnlyWhenWritingToTheJournal() throws {
        XCTAssertEqual(JournalStream.prefix(for: .critical), "<2>")
        XCTAssertEqual(JournalStream.prefix(for: .error), "<3>")
        XCTAssertEqual(JournalStream.prefix(for: .warning), "<4>")
        XCTAssertEqual(JournalStream.prefix(for: .notice), "<5>")
        XCTAssertEqual(JournalStream.prefix(for: .info), "<6>")
        XCTAssertEqual(JournalStream.prefix(for: .debug), "<7>")
        XCTAssertEqual(JournalStream.prefix(for: .trace), "<7>")

        let journal = LogCapture()
        journal.logger(journal: true).error("hook failed", metadata: ["item": "r#1"])
        XCTAssertTrue(try XCTUnwrap(journal.lines.first).hasPrefix("<3>time="), journal.lines.description)
        XCTAssertTrue(journal.lines[0].hasSuffix(" level=error msg=\"hook failed\" item=r#1\n"), journal.lines[0])

        let plain = LogCapture()
        plain.logger(journal: false).warning("w")
        XCTAssertTrue(try XCTUnwrap(plain.lines.first).hasPrefix("time="), plain.lines.description)
    }

    func testEveryCopyOfTheLoggerFollowsALevelChange() {
        let capture = LogCapture(level: .info)
        let kept = capture.logger()
        var other = kept
        kept.debug("hidden")
        other.logLevel = .debug   // what a reload does
        kept.debug("shown")
        XCTAssertEqual(capture.lines.count, 1)
        XCTAssertTrue(capture.lines[0].contains("msg=shown"))
    }

    func testValuesWithControlCharactersStayOnOneLine() {
        XCTAssertEqual(LogfmtHandler.quote("plain"), "plain")
        XCTAssertEqual(LogfmtHandler.quote("a b"), "\"a b\"")
        XCTAssertEqual(LogfmtHandler.quote("a\nb\tc\u{1B}[31m"), "\"a\\nb\\tc\\u001b[31m\"")
        XCTAssertEqual(LogfmtHandler.quote(""), "\"\"")
    }
}
