import Foundation
@testable import SpoolConfiguration
import XCTest

/// The configuration table: one row per setting, read by the config file, `--print-config`,
/// validation and the reload.
final class ConfigurationTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "spoolfetch-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func file(_ text: String, name: String = "spoolfetch.conf") throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func testEveryKeyIsListedOnceAndItsExampleIsValidAndNotTheDefault() throws {
        let names = ConfigurationKey.all.map(\.name)
        XCTAssertEqual(Set(names).count, names.count, "a key listed twice")
        for key in ConfigurationKey.all {
            var c = DaemonConfiguration()
            XCTAssertNil(key.check(c), "\(key.name): the default is valid")
            XCTAssertNoThrow(try key.set(key.example, in: &c), "\(key.name) example \(key.example)")
            XCTAssertNotEqual(key.format(c), key.format(DaemonConfiguration()), "\(key.name): the example differs from the default")
            XCTAssertTrue(key.help.contains("Example: --\(key.name) "), key.help)
            XCTAssertTrue(key.help.contains("(default "), key.help)
        }
        XCTAssertFalse(names.contains("max-claims"), "max-claims is no longer a setting")
    }

    func testNewSettingsAndTheirDefaults() throws {
        let c = DaemonConfiguration()
        XCTAssertEqual(c.hookTimeout, 300)
        XCTAssertEqual(c.maxHooks, 4)
        XCTAssertEqual(c.rescanInterval, 0)
        XCTAssertEqual(c.maxRequestBytes, 64 << 20)
        XCTAssertEqual(c.maxItems, 1_000_000)
        XCTAssertFalse(c.due)
        let printed = c.printed
        for line in ["hook-timeout = 300", "max-hooks = 4", "rescan-interval = 0", "max-request-bytes = 64M", "sync-every = 256M",
                     "max-items = 1000000", "resource-timeout = 604800", "log-level = \"info\"", "window = \"\""] {
            XCTAssertTrue(printed.contains(line + "\n"), "\(line) in\n\(printed)")
        }
        XCTAssertEqual(ConfigurationKey.named("min-free")?.defaultText, "auto")
        XCTAssertEqual(ConfigurationKey.named("window")?.defaultText, "none")
    }

    func testPrintedConfigurationReadsBackToTheSameValues() throws {
        var c = DaemonConfiguration()
        for key in ConfigurationKey.all { try key.set(key.example, in: &c) }
        c.onGroup = #"logger -t "spool fetch" \ done"#
        var back = DaemonConfiguration()
        try back.apply(configFile: c.printed, path: "printed")
        XCTAssertEqual(back.printed, c.printed)
        XCTAssertEqual(back.onGroup, c.onGroup)
    }

    func testMaxRateTakesASchedule() throws {
        var c = DaemonConfiguration()
        try c.apply(configFile: "max-rate = 1M 08:00-20:00, 4M 20:00-23:30, 0\n", path: "f")
        XCTAssertEqual(c.maxRate.windows.map(\.rate), [1 << 20, 4 << 20])
        XCTAssertEqual(c.maxRate.defaultRate, 0)
        XCTAssertTrue(c.printed.contains("max-rate = \"1M 08:00-20:00, 4M 20:00-23:30, 0\"\n"), c.printed)
        var back = DaemonConfiguration()
        try back.apply(configFile: c.printed, path: "printed")
        XCTAssertEqual(back.maxRate, c.maxRate)
        XCTAssertThrowsError(try c.apply(configFile: "max-rate = 1M 8:00-20:00, 0\n", path: "f")) {
            XCTAssertTrue("\($0)".hasPrefix("f:1: max-rate must be a byte count"), "\($0)")
            XCTAssertTrue("\($0)".hasSuffix("'8:00-20:00' must look like 08:00-20:00 (HH:MM-HH:MM, start and end differ)"), "\($0)")
        }
        XCTAssertThrowsError(try c.apply(configFile: "max-rate = 1M 08:00-20:00\n", path: "f")) {
            XCTAssertTrue("\($0)".contains("the last entry is the rate outside the windows"), "\($0)")
        }
    }

    func testFileErrorsNameTheFileTheLineAndTheKey() throws {
        var c = DaemonConfiguration()
        XCTAssertThrowsError(try c.apply(configFile: "# x\nconcurency = 3\n", path: "/etc/s.conf")) { error in
            let text = "\(error)"
            XCTAssertTrue(text.hasPrefix("/etc/s.conf:2: unknown key 'concurency' (did you mean concurrency?)"), text)
        }
        XCTAssertThrowsError(try c.apply(configFile: "per-host = 0\n", path: "f")) {
            XCTAssertEqual("\($0)", "f:1: per-host must be at least 1, got 0")
        }
        XCTAssertThrowsError(try c.apply(configFile: "max-rate = 2X\n", path: "f")) {
            XCTAssertTrue("\($0)".hasPrefix("f:1: max-rate must be a byte count"), "\($0)")
        }
        XCTAssertThrowsError(try c.apply(configFile: "hook-timeout = 1\nhook-timeout = 2\n", path: "f")) {
            XCTAssertEqual("\($0)", "f:2: hook-timeout is already set on line 1")
        }
        XCTAssertThrowsError(try c.apply(configFile: "window = \"22:00-06:00\n", path: "f")) {
            XCTAssertTrue("\($0)".contains("f:1: window: unterminated"), "\($0)")
        }
        XCTAssertThrowsError(try c.apply(configFile: "just words\n", path: "f")) {
            XCTAssertEqual("\($0)", "f:1: expected 'key = value', got 'just words'")
        }
    }

    func testSourceLayersAndWhichLayerAProblemIsIn() throws {
        let path = try file("concurrency = 32\nwindow = \"22:00-06:00\"\nspool = \"/from/file\"\n")
        let c = try ConfigurationSource(configFile: path, flags: ["concurrency": "8"], environmentSpool: "/from/env").load()
        XCTAssertEqual(c.concurrency, 8, "a flag wins over the file")
        XCTAssertEqual(c.window, "22:00-06:00")
        XCTAssertEqual(c.spool, "/from/env", "the environment wins over the file")
        XCTAssertEqual(try ConfigurationSource(configFile: path, flags: ["spool": "/flag"], environmentSpool: "/env").load().spool, "/flag")

        func failure(_ source: ConfigurationSource) -> ConfigurationSource.Failure? {
            do { _ = try source.load(); return nil } catch { return error }
        }
        guard case .configuration(let missing) = failure(ConfigurationSource(configFile: directory + "/nope.conf")) else {
            return XCTFail("a missing file is a configuration failure")
        }
        XCTAssertEqual(missing.description,
                       "cannot read the config file \(directory!)/nope.conf: No such file or directory (errno 2)")
        guard case .configuration(let folder) = failure(ConfigurationSource(configFile: directory)) else { return XCTFail() }
        XCTAssertTrue(folder.description.contains("Is a directory"), folder.description)
        guard case .flag(let flag) = failure(ConfigurationSource(flags: ["max-hooks": "none"])) else { return XCTFail() }
        XCTAssertEqual(flag.description, "--max-hooks must be a whole number, got 'none'")
        guard case .configuration(let relation) = failure(ConfigurationSource(flags: ["retry-base": "10", "retry-cap": "5"])) else {
            return XCTFail()
        }
        XCTAssertTrue(relation.description.contains("--retry-base (10) must be at most --retry-cap (5)"), relation.description)
        guard case .configuration = failure(ConfigurationSource(once: true, due: true)) else { return XCTFail("--once with --due") }
    }

    func testReloadAppliesRunTimeSettingsAndReportsTheRest() throws {
        let path = try file("concurrency = 4\nlog-level = \"info\"\n")
        let running = try ConfigurationSource(configFile: path, flags: ["per-host": "2"]).load()
        XCTAssertTrue(try running.reloaded().isEmpty, "nothing changed")

        _ = try file("""
            concurrency = 12
            per-host = 9
            log-level = "debug"
            on-item = "/usr/local/bin/item-done"
            hook-timeout = 30
            max-rate = 1M
            ca-file = "/etc/ssl/new.pem"
            stall-timeout = 5
            """)
        let reload = try running.reloaded()
        XCTAssertEqual(reload.applied.map(\.key), ["concurrency", "max-rate", "on-item", "hook-timeout", "log-level"])
        XCTAssertEqual(reload.applied.first, ConfigurationChange(key: "concurrency", old: "4", new: "12"))
        XCTAssertEqual(reload.needsRestart.map(\.key), ["stall-timeout", "ca-file"])
        XCTAssertEqual(reload.configuration.concurrency, 12)
        XCTAssertEqual(reload.configuration.perHost, 2, "the flag given at start still wins")
        XCTAssertEqual(reload.configuration.loggerLevel, .debug)
        XCTAssertEqual(reload.configuration.hookTimeout, 30)
        XCTAssertEqual(reload.configuration.maxRate.description, "\(1 << 20)")
        XCTAssertEqual(reload.configuration.stallTimeout, 60, "not applied: needs a restart")
        XCTAssertNil(reload.configuration.caFile)

        _ = try file("concurrency = 0\n")
        XCTAssertThrowsError(try running.reloaded(), "an invalid file changes nothing") {
            XCTAssertTrue("\($0)".contains("concurrency must be at least 1"), "\($0)")
        }
        XCTAssertTrue(try DaemonConfiguration().reloaded().isEmpty, "a configuration built in code has no source")
    }
}
